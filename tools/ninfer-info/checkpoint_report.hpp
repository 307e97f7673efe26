// ninfer-info --checkpoint DIR: checks a downloaded checkpoint folder before a long load — its
// files, every tensor's presence, shape and dtype against config.json, the tokenizer — and says
// how much memory the weights and the KV cache at a given context would take.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::tools {

struct CheckpointCheck {
  std::string item;    // "config", "weights", "tensors", "tokenizer", "memory"
  bool ok = true;
  std::string detail;  // what was found, or what is wrong and how to fix it
};

struct CheckpointReport {
  std::filesystem::path dir;
  std::vector<CheckpointCheck> checks;
  int problems() const;
};

// Never throws for a broken folder: each problem is a failed check. `context`: the tokens one
// sequence holds for the KV estimate (default: the model's, min(max_position_embeddings, 32768)).
CheckpointReport check_checkpoint(const std::filesystem::path& dir, std::optional<int64_t> context);

std::string report_text(const CheckpointReport& r);

} // namespace ninfer::tools
