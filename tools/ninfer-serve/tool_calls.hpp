// The model's tool calls, read out of its answer text as it streams.
//
// A Qwen model calls a function by writing, in its answer,
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// (the chat template's tool prompt asks for exactly this). ToolCallParser takes the answer text
// piece by piece and says what is content and what is a call, as soon as that is known, so a
// stream can send a call's name, then its arguments as they are written. The whole text given
// at once gives the same events joined (parse_tool_calls), so a streamed reply always
// reassembles to the non-streamed one.
//
// What counts as a call: `<tool_call>`, then (whitespace allowed between the parts) `{`,
// `"name"`, `:`, a JSON string naming a function the request declared, `,`, `"arguments"`, `:`
// and the `{` that opens the arguments. Anything else after `<tool_call>` (another shape, an
// unknown name, the end of the text) is not a call: the block stays content, as written. The
// arguments are the text of that object, up to its matching `}` (strings and escapes
// respected), passed on as the model wrote them, like OpenAI's `arguments` string: a reply cut
// short leaves them unfinished. After the object, whitespace, the `}` closing the call and
// `</tool_call>` end it; other text there is content again. Whitespace between calls and the
// newline the template puts before the first call are not content; a reply without calls is
// its text exactly.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ninfer::tools {

struct ToolCallEvent {
  enum class Kind {
    Content,   // `text` is answer text
    CallStart, // call `call` begins; `text` is the function's name
    Arguments, // `text` is the next piece of call `call`'s arguments
    CallEnd,   // call `call` is complete; `text` is the block as the model wrote it
  };
  Kind kind;
  size_t call = 0;
  std::string text;
};

struct ToolCallOptions {
  // The functions the request declared; a block naming any other is content.
  std::vector<std::string> names;
  // Text the prompt already holds at the start of the answer (tool_choice's prefill, such as
  // `<tool_call>\n{"name": "f", "arguments":`): read as if the model had written it.
  std::string prefix;
  // The prefix forces a call: arguments that do not open with `{` are still that call's
  // arguments (up to `</tool_call>`, less the `}` that closes the call), not content.
  bool forced = false;
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallOptions options);

  // The events `text` completes (text that may still turn out to be part of a call, or of
  // whitespace that is not content, is held back).
  std::vector<ToolCallEvent> push(std::string_view text);
  // The answer has ended: whatever was held back is settled.
  std::vector<ToolCallEvent> finish();

  size_t calls() const { return calls_; }

 private:
  enum class Mode { Content, Header, Arguments, RawArguments, Trailer };
  void run(std::vector<ToolCallEvent>& out, bool at_end);
  void content(std::vector<ToolCallEvent>& out, bool at_end);
  bool header(std::vector<ToolCallEvent>& out, bool at_end);
  void arguments(std::vector<ToolCallEvent>& out, bool at_end);
  void raw_arguments(std::vector<ToolCallEvent>& out, bool at_end);
  void trailer(std::vector<ToolCallEvent>& out, bool at_end);
  void emit_content(std::vector<ToolCallEvent>& out, std::string_view text);
  void end_call(std::vector<ToolCallEvent>& out);

  ToolCallOptions options_;
  Mode mode_ = Mode::Content;
  std::string pending_;        // text received, not yet settled
  std::string space_before_;   // whitespace before a `<tool_call>` that may not be a call
  std::string raw_;            // the current call's block as written
  bool after_call_ = false;    // leading whitespace of the content that follows is dropped
  bool forced_next_ = false;   // the block being read is the prefilled, forced one
  size_t calls_ = 0;
  // The arguments object being read: nesting depth, inside a string, after a backslash.
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;
  std::string raw; // the block as the model wrote it
};
struct ParsedAnswer {
  std::string content;
  std::vector<ParsedToolCall> calls;
};
// A whole answer: ToolCallParser's events, joined.
ParsedAnswer parse_tool_calls(std::string_view text, const ToolCallOptions& options);

} // namespace ninfer::tools
