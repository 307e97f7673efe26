// Runs tests/tokenizer/hf_oracle.mjs (@huggingface/tokenizers under node) on texts: the
// independent reference for random-text agreement tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ninfer::test {

struct OracleCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

// Throws std::runtime_error with a fix (install node, run scripts/setup-npm.sh) when the oracle
// cannot run.
std::vector<OracleCase> run_hf_oracle(const std::filesystem::path& tokenizer_json, const std::vector<std::string>& texts);

} // namespace ninfer::test
