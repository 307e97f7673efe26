// One Tokenizer shared by several threads (as the server shares it): the per-word cache and the
// regex state must not let concurrent encodes disturb each other.
#include <gtest/gtest.h>

#include <thread>

#include "ninfer/tokenizer/tokenizer.hpp"
#include "qwen3_tokenizer.hpp"
#include "random_text.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;

TEST(TokenizerThreads, ConcurrentEncodesGiveTheSameIdsAsAFreshTokenizer) {
  auto rng = test::fresh_rng("tokenizer threads");
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) texts.push_back(test::random_text(rng));

  // The reference: a separately loaded tokenizer (its own cache), used from one thread.
  const Tokenizer reference = Tokenizer::load(test::qwen3_tokenizer_path());
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : texts) want.push_back(reference.encode(t));

  const Tokenizer shared = Tokenizer::load(test::qwen3_tokenizer_path());
  constexpr int kThreads = 4;
  std::vector<std::vector<std::vector<int32_t>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Each thread walks the texts in a different order so that cache fills interleave.
      for (size_t k = 0; k < texts.size(); ++k) got[t].push_back(shared.encode(texts[(k * (2 * t + 1)) % texts.size()]));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (size_t k = 0; k < texts.size(); ++k)
      ASSERT_EQ(got[t][k], want[(k * (2 * t + 1)) % texts.size()]) << "thread " << t << " text " << k;
}

} // namespace
