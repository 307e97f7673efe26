// ReplyText: a reply's text as tokens arrive, with a thinking model's reasoning split from the
// answer. Replies are written as text (fresh random words and newlines each run), encoded with
// the real Qwen3 tokenizer, fed token by token; the reference split is plain string work on
// the written text.
#include <gtest/gtest.h>

#include <random>

#include "demo_checkpoint.hpp"
#include "ninfer/serving/reply_text.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

using namespace ninfer;
using namespace ninfer::serving;

namespace {

const Tokenizer& qwen() {
  static const Tokenizer t = Tokenizer::load(test::real_tokenizer());
  return t;
}

ReasoningMarkers markers() {
  const ChatTokens ct = chat_tokens(qwen());
  return {ct.think, ct.think_end};
}

// Random words (some multi-byte) with newlines between some of them.
std::string random_text(std::mt19937& rng, int words) {
  static const char* vocab[] = {"the", "sky", "is", "blue", "2+2", "=", "4.", "héllo", "日本", "🙂", "so", "answer"};
  std::string s;
  for (int i = 0; i < words; ++i) {
    s += vocab[rng() % std::size(vocab)];
    s += rng() % 4 == 0 ? "\n" : " ";
  }
  return s + "end";
}

std::string strip_newlines(std::string s, bool leading, bool trailing) {
  if (leading) s.erase(0, std::min(s.size(), s.find_first_not_of('\n')));
  if (trailing) s.erase(s.find_last_not_of('\n') + 1);
  return s;
}

struct Fed {
  std::string answer, reasoning; // the pieces, joined by part
  bool stopped = false;
};

Fed feed(ReplyText& t, const std::vector<int32_t>& ids) {
  Fed f;
  for (int32_t id : ids) {
    ReplyText::Out o = t.push(id);
    (o.reasoning ? f.reasoning : f.answer) += o.text;
    if (o.stopped) {
      f.stopped = true;
      return f;
    }
  }
  ReplyText::Out o = t.finish();
  (o.reasoning ? f.reasoning : f.answer) += o.text;
  f.stopped = o.stopped;
  return f;
}

std::mt19937 seeded() {
  const unsigned seed = std::random_device{}();
  testing::Test::RecordProperty("seed", std::to_string(seed));
  return std::mt19937(seed);
}

} // namespace

TEST(ReplyText, SplitsReasoningFromTheAnswer) {
  std::mt19937 rng = seeded();
  for (int round = 0; round < 20; ++round) {
    const std::string thought = random_text(rng, 1 + rng() % 30), answer = random_text(rng, 1 + rng() % 30);
    const std::string reply = "<think>\n" + thought + "\n</think>\n\n" + answer;
    ReplyText t(&qwen(), {}, markers(), qwen().encode("<|im_start|>assistant\n"));
    const Fed f = feed(t, qwen().encode(reply));
    EXPECT_EQ(t.reasoning(), strip_newlines(thought, true, true)) << reply;
    EXPECT_EQ(t.answer(), strip_newlines(answer, true, false)) << reply;
    // What was streamed, part by part, is the whole of each part.
    EXPECT_EQ(f.reasoning, t.reasoning());
    EXPECT_EQ(f.answer, t.answer());
    EXPECT_FALSE(f.stopped);
  }
}

TEST(ReplyText, ReplyCutWhileThinkingIsAllReasoning) {
  std::mt19937 rng = seeded();
  const std::string thought = random_text(rng, 20);
  ReplyText t(&qwen(), {}, markers(), {});
  const Fed f = feed(t, qwen().encode("<think>\n" + thought));
  EXPECT_EQ(t.reasoning(), strip_newlines(thought, true, true));
  EXPECT_EQ(t.answer(), "");
  EXPECT_EQ(f.answer, "");
  EXPECT_EQ(f.reasoning, t.reasoning());
}

TEST(ReplyText, PromptThatOpenedTheThinkBlockStartsInReasoning) {
  std::mt19937 rng = seeded();
  const std::string thought = random_text(rng, 10), answer = random_text(rng, 10);
  ReplyText t(&qwen(), {}, markers(), qwen().encode("<|im_start|>assistant\n<think>\n"));
  feed(t, qwen().encode(thought + "\n</think>\n\n" + answer));
  EXPECT_EQ(t.reasoning(), strip_newlines(thought, true, true));
  EXPECT_EQ(t.answer(), answer);
  // An earlier turn's closed block does not count.
  ReplyText closed(&qwen(), {}, markers(), qwen().encode("<think>\nx\n</think>\n\nok<|im_end|>\n<|im_start|>assistant\n"));
  feed(closed, qwen().encode(answer));
  EXPECT_EQ(closed.reasoning(), "");
  EXPECT_EQ(closed.answer(), answer);
}

TEST(ReplyText, WithoutMarkersTheTextIsTheDecodedReply) {
  std::mt19937 rng = seeded();
  const std::string reply = "<think>\n" + random_text(rng, 15) + "\n</think>\n\n" + random_text(rng, 15);
  const std::vector<int32_t> ids = qwen().encode(reply);
  ReplyText t(&qwen(), {}, std::nullopt, {});
  const Fed f = feed(t, ids);
  EXPECT_EQ(t.answer(), qwen().decode(ids));
  EXPECT_EQ(t.reasoning(), "");
  EXPECT_EQ(f.answer, t.answer());
}

TEST(ReplyText, StopStringEndsTheAnswerButNotAcrossTheMarker) {
  ReplyText t(&qwen(), {"4."}, markers(), {});
  const Fed f = feed(t, qwen().encode("<think>\nwe need 2+2=4.\n</think>\n\nThe answer is 4. Done"));
  // The stop string inside the reasoning ends the reply there.
  EXPECT_TRUE(f.stopped);
  EXPECT_EQ(t.reasoning(), "we need 2+2=");
  EXPECT_EQ(t.answer(), "");
  ReplyText a(&qwen(), {"4."}, markers(), {});
  const Fed g = feed(a, qwen().encode("<think>\nthinking 2+2=4\n</think>\n\nThe answer is 4. Done"));
  EXPECT_TRUE(g.stopped);
  EXPECT_EQ(a.reasoning(), "thinking 2+2=4");
  EXPECT_EQ(a.answer(), "The answer is ");
  // "4" ends the reasoning and "." opens nothing: a stop string does not span the marker.
  ReplyText b(&qwen(), {"4."}, markers(), {});
  const Fed h = feed(b, qwen().encode("<think>\n2+2=4</think>.ok"));
  EXPECT_FALSE(h.stopped);
  EXPECT_EQ(b.reasoning(), "2+2=4");
  EXPECT_EQ(b.answer(), ".ok");
}

// A stop string matches a part's own text: the newlines no part holds (after `<think>`, before
// `</think>`, opening the answer) never match "\n"; the first newline inside the reasoning, else
// inside the answer, ends the reply there.
TEST(ReplyText, StopStringsSeeOnlyEachPartsText) {
  std::mt19937 rng = seeded();
  for (int round = 0; round < 20; ++round) {
    const std::string thought = random_text(rng, 1 + rng() % 12), answer = random_text(rng, 1 + rng() % 12);
    ReplyText t(&qwen(), {"\n"}, markers(), {});
    const Fed f = feed(t, qwen().encode("<think>\n" + thought + "\n</think>\n\n" + answer));
    const std::string part_r = strip_newlines(thought, true, true), part_a = strip_newlines(answer, true, false);
    const size_t in_r = part_r.find('\n'), in_a = part_a.find('\n');
    if (in_r != std::string::npos) {
      EXPECT_EQ(t.reasoning(), part_r.substr(0, in_r)) << thought;
      EXPECT_EQ(t.answer(), "");
    } else {
      EXPECT_EQ(t.reasoning(), part_r);
      EXPECT_EQ(t.answer(), part_a.substr(0, in_a)) << answer;
    }
    EXPECT_EQ(f.stopped, in_r != std::string::npos || in_a != std::string::npos);
    EXPECT_EQ(f.reasoning, t.reasoning());
    EXPECT_EQ(f.answer, t.answer());
  }
}
