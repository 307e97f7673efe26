// The random-weight Qwen3.5 checkpoint (real Qwen3 tokenizer) that tool tests run against.
#pragma once

#include <filesystem>
#include <string>

namespace ninfer::test {

// The Qwen3 tokenizer.json that scripts/setup-npm.sh installs.
std::filesystem::path real_tokenizer();

// Made once per test process with the ninfer-make-checkpoint binary given (preset
// qwen3_5-cpu-small, seed 7) in a temporary folder; a failure is a test failure.
const std::filesystem::path& demo_checkpoint(const std::string& make_checkpoint_bin);

} // namespace ninfer::test
