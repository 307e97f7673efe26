#include "tool_choice.hpp"

namespace ninfer::tools {

std::string ToolSetup::prefill() const {
  if (!forced()) return {};
  if (choice == ToolChoice::Named) return "<tool_call>\n{\"name\": \"" + named + "\", \"arguments\":";
  return "<tool_call>\n{\"name\": \"";
}

std::vector<std::string> ToolSetup::stop_strings() const {
  if (active() && (choice == ToolChoice::Named || !parallel)) return {"</tool_call>"};
  return {};
}

ToolCallOptions ToolSetup::parser_options() const {
  ToolCallOptions o;
  o.names = choice == ToolChoice::Named ? std::vector<std::string>{named} : names;
  o.prefix = prefill();
  // A named call is the reply whatever the model writes as arguments; "required" still needs
  // a well-formed call, as the model picks the function.
  o.forced = choice == ToolChoice::Named;
  return o;
}

std::string check_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return "a function name has 1 to 64 characters";
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return "'" + name + "': a function name may hold only letters, digits, '_' and '-'";
  return {};
}

} // namespace ninfer::tools
