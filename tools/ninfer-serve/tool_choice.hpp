// What a request says about tools, in either API's words: the functions the model may call
// (as the chat template lists them), and whether it must call one (tool_choice). Both APIs'
// parsers fill it in; the prompt, the stop strings and the reply's parsing follow from it.
//
// There is no constrained sampling, so a choice that forces a call is enforced by starting the
// answer with the call (a prefill after the generation prompt, read back as if the model had
// written it):
//   a named function:  <tool_call>\n{"name": "NAME", "arguments":
//   any function:      <tool_call>\n{"name": "
// Both end where the Qwen tokenizer ends a token in a call the model writes itself (`":` and
// ` "` are tokens; ` {"` opens the arguments), so the model continues as it would have. A
// forced call skips thinking: the prompt gets the empty think block before the prefill.
#pragma once

#include <string>
#include <vector>

#include "tool_calls.hpp"

namespace ninfer::tools {

enum class ToolChoice {
  Auto,     // the model decides (OpenAI "auto", Anthropic {"type": "auto"})
  None,     // no call is read from the reply (the tools are still listed in the prompt)
  Required, // at least one call, to any function (OpenAI "required", Anthropic "any")
  Named,    // a call to `named` (OpenAI {"type": "function", ...}, Anthropic {"type": "tool"})
};

struct ToolSetup {
  std::vector<std::string> rendered; // each tool as the template writes it (template_json)
  std::vector<std::string> names;    // the declared functions, in order
  ToolChoice choice = ToolChoice::Auto;
  std::string named;                 // ToolChoice::Named: the function
  bool parallel = true;              // more than one call per reply

  // Calls are read from the reply.
  bool active() const { return !names.empty() && choice != ToolChoice::None; }
  // The choice puts the start of a call in the prompt (Required, Named).
  bool forced() const { return active() && (choice == ToolChoice::Required || choice == ToolChoice::Named); }
  // The text that follows the generation prompt: empty unless forced().
  std::string prefill() const;
  // Stop strings the choice adds: `</tool_call>` when only one call is wanted (a named
  // function, or parallel calls off), so generation ends with the first call.
  std::vector<std::string> stop_strings() const;
  ToolCallOptions parser_options() const;
};

// A function name both APIs accept: 1 to 64 of [A-Za-z0-9_-] (it is written into the prompt as
// is, so it must need no escaping). Returns an error message, or empty when valid.
std::string check_function_name(const std::string& name);

} // namespace ninfer::tools
