// The text of one reply as its tokens arrive: streaming UTF-8 decoding, stop strings, and a
// thinking model's reasoning split from the answer. Each token releases the text that is now
// final (whole characters, no possible stop-string start), marked as reasoning or answer.
//
//   ReplyText t(&tokenizer, {"\n\n"}, ReasoningMarkers{think, think_end}, prompt_ids);
//   for (id : generated) { auto out = t.push(id); send(out.text, out.reasoning); if (out.stopped) break; }
//   send(t.finish().text);
//
// Reasoning is the text between the open and close markers (Qwen's <think> and </think>); the
// markers are in neither part, nor are the newlines around the reasoning or the newlines that
// open the answer after it. A reply cut before the close marker is all reasoning. When the
// prompt already opened the block (its last marker is the open one), the reply starts in it.
// Stop strings are matched within each part, not across a marker.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ninfer/sampling/stop.hpp"
#include "ninfer/tokenizer/stream_decoder.hpp"

namespace ninfer::serving {

// A thinking model's reasoning markers (Qwen: <think> and </think>).
struct ReasoningMarkers {
  int32_t open = -1;
  int32_t close = -1;
};

class ReplyText {
 public:
  // `tokenizer` may be null: then no text at all. It must outlive this.
  ReplyText(const Tokenizer* tokenizer, std::vector<std::string> stop_strings,
            std::optional<ReasoningMarkers> markers, std::span<const int32_t> prompt);

  struct Out {
    std::string text;       // final text released now (often empty)
    bool reasoning = false; // it belongs to the reasoning
    bool stopped = false;   // a stop string was found: the reply ends here
  };
  // Adds one generated token (not a stop token). After a stop, do not push more.
  Out push(int32_t token);
  // The reply ended (length, stop token): whatever was held back is final.
  Out finish();

  const std::string& answer() const { return answer_; }
  const std::string& reasoning() const { return reasoning_; }
  bool in_reasoning() const { return in_reasoning_; }

 private:
  // Decoded text as the current part holds it (the newlines no part holds taken out), before
  // the stop matcher sees it: stop strings match a part's own text.
  std::string shape(std::string text);
  // The matcher's step: the text it released goes into the current part.
  Out take(StopMatcher::Step m, std::string flushed = {});
  // What the decoder and matcher still hold becomes final for the current part.
  Out release();

  std::optional<StreamDecoder> decoder_;
  StopMatcher matcher_;
  std::optional<ReasoningMarkers> markers_;
  bool in_reasoning_ = false;
  bool strip_newlines_ = false; // just after a marker: drop leading newlines
  std::string held_newlines_;   // reasoning's trailing newlines: dropped if the close marker follows
  std::string answer_, reasoning_;
};

} // namespace ninfer::serving
