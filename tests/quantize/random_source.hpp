// Float checkpoints with fresh random weights for ninfer-quantize to read: a fixture's config
// and tensor names and shapes, values drawn here (a few outlier rows, an all-zero group, rows
// small enough for subnormal float16 scales), in BF16, F16 or F32, one file or two shards, with
// tokenizer and chat-template files beside them. Plus running the tool and reading its output.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "process.hpp"
#include "raw_safetensors.hpp"

namespace ninfer::test {

struct SourceCheckpoint {
  std::filesystem::path dir;
  RawTensors tensors;
  nlohmann::json config;
};

SourceCheckpoint make_source_checkpoint(const std::string& fixture, const std::string& dtype, std::mt19937_64& rng,
                                        const std::filesystem::path& dir, bool sharded = false);

// The stored bits of `value` (already representable) in "BF16", "F16" or "F32".
std::string encode_value(double value, const std::string& dtype);

// Runs the built ninfer-quantize with `args` (each shell-quoted), `env` prefixed ("A=1 B=2").
ProcessOutput run_quantize(const std::vector<std::string>& args, const std::string& env = "");

// Every tensor of an output folder: model.safetensors, or the shards its index names.
RawTensors read_output_tensors(const std::filesystem::path& dir);

// A byte-level BPE tokenizer.json (GPT-2's byte alphabet as ids 0..255, no merges) in `dir`:
// one token per byte of text, within every fixture's vocabulary.
void write_byte_level_tokenizer(const std::filesystem::path& dir);

// Text for calibration and held-out evaluation: `words` words drawn from a small fixed lexicon
// (so texts of different seeds share their statistics), in sentences.
std::string lexicon_text(std::mt19937_64& rng, int words);

// The files ninfer-quantize is expected to copy from a source made above.
std::vector<std::string> side_files();

} // namespace ninfer::test
