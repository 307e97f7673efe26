// Stop strings on streamed text: the outcome does not depend on how the text is chunked, and
// exactly the tail that could start a stop string is held back.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ninfer/sampling/stop.hpp"
#include "test_support.hpp"

namespace ninfer::test {
namespace {

struct Expected {
  std::string emitted;
  bool stopped = false;
  std::string match;
};

// Naive reference on the whole text: the occurrence that ends first (then starts first).
Expected reference(const std::string& text, const std::vector<std::string>& stops) {
  Expected e{text, false, ""};
  size_t best_end = std::string::npos, best_start = 0;
  for (size_t end = 1; end <= text.size() && !e.stopped; ++end) {
    for (size_t start = 0; start < end; ++start) {
      for (const auto& s : stops) {
        if (!s.empty() && s.size() == end - start && text.compare(start, s.size(), s) == 0) {
          best_end = end;
          best_start = start;
          e.stopped = true;
          e.match = s;
          break;
        }
      }
      if (e.stopped) break;
    }
  }
  if (e.stopped) e.emitted = text.substr(0, best_start);
  (void)best_end;
  return e;
}

// Longest suffix of `text` that is a proper prefix of some stop string.
size_t reference_hold(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& s : stops)
    for (size_t len = 1; len < s.size() && len <= text.size(); ++len)
      if (text.substr(text.size() - len) == s.substr(0, len)) best = std::max(best, len);
  return best;
}

TEST(StopMatcher, StreamsAroundAStopSplitAcrossChunks) {
  StopMatcher m({"</s>"});
  auto a = m.feed("Hello </");
  EXPECT_EQ(a.emit, "Hello ");
  EXPECT_EQ(a.held_back, 2u);
  EXPECT_FALSE(a.stopped);
  auto b = m.feed("s> never shown");
  EXPECT_TRUE(b.stopped);
  EXPECT_EQ(b.emit, "");
  EXPECT_EQ(b.match, "</s>");
  EXPECT_EQ(m.feed("more").emit, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.feed("ST").emit, "");
  EXPECT_EQ(m.feed("OCK").emit, "STOCK");
  EXPECT_EQ(m.feed("S").held_back, 1u);
  EXPECT_EQ(m.flush(), "S");
}

TEST(StopMatcher, EarliestEndingStopWins) {
  // "b" completes before "abc" would: a character stream hits it first.
  StopMatcher m({"abc", "b"});
  auto s = m.feed("xabc");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.match, "b");
  EXPECT_EQ(s.emit, "xa");
}

TEST(StopMatcher, AnyChunkingGivesTheReferenceOutcome) {
  auto rng = fresh_rng("StopMatcher.AnyChunkingGivesTheReferenceOutcome");
  const std::string alphabet = "ab c";
  std::uniform_int_distribution<size_t> letter(0, alphabet.size() - 1);
  auto word = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += alphabet[letter(rng)];
    return s;
  };
  std::uniform_int_distribution<size_t> len(1, 4), count(0, 3), text_len(0, 40), cut(0, 6);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    for (size_t i = count(rng); i > 0; --i) stops.push_back(word(len(rng)));
    const std::string text = word(text_len(rng));
    const Expected want = reference(text, stops);

    StopMatcher m(stops);
    std::string emitted, fed;
    bool stopped = false;
    std::string match;
    for (size_t pos = 0; pos < text.size() && !stopped;) {
      const size_t n = std::min(text.size() - pos, cut(rng));
      const std::string chunk = text.substr(pos, n);
      pos += n;
      fed += chunk;
      const auto step = m.feed(chunk);
      emitted += step.emit;
      if (step.stopped) {
        stopped = true;
        match = *step.match;
      } else {
        // Nothing lost, and exactly the could-be-a-stop tail withheld.
        ASSERT_EQ(emitted.size() + step.held_back, fed.size());
        ASSERT_EQ(step.held_back, reference_hold(fed, stops)) << "text '" << fed << "'";
      }
    }
    if (!stopped) emitted += m.flush();
    ASSERT_EQ(stopped, want.stopped) << "text '" << text << "'";
    ASSERT_EQ(emitted, want.emitted) << "text '" << text << "'";
    if (stopped) ASSERT_EQ(match, want.match) << "text '" << text << "'";
  }
}

TEST(StopConditions, StopTokenIds) {
  StopConditions c;
  c.token_ids = {151645, 151643};
  EXPECT_TRUE(c.is_stop_token(151645));
  EXPECT_FALSE(c.is_stop_token(0));
}

} // namespace
} // namespace ninfer::test
