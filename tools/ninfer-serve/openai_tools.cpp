#include "openai_tools.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "api_error.hpp"
#include "template_json.hpp"

namespace ninfer::tools {
namespace {

std::string required_string(const RequestJson& object, const char* key, const std::string& param) {
  const RequestJson* v = request_field(object, key);
  if (!v || !v->is_string()) throw bad_param(param + "." + key, "required string");
  return v->get<std::string>();
}

std::string function_name(const RequestJson& object, const std::string& param) {
  std::string name = required_string(object, "name", param);
  if (std::string e = check_function_name(name); !e.empty()) throw bad_param(param + ".name", e);
  return name;
}

} // namespace

ToolSetup parse_openai_tools(const RequestJson& body) {
  ToolSetup s;
  if (const RequestJson* tools = request_field(body, "tools")) {
    if (!tools->is_array()) throw bad_param("tools", "expected an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const RequestJson& t = (*tools)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw bad_param(p, "expected an object");
      if (required_string(t, "type", p) != "function") throw bad_param(p + ".type", "only \"function\" tools are supported");
      const RequestJson* f = request_field(t, "function");
      if (!f || !f->is_object()) throw bad_param(p + ".function", "required object");
      std::string name = function_name(*f, p + ".function");
      if (std::find(s.names.begin(), s.names.end(), name) != s.names.end())
        throw bad_param(p + ".function.name", fmt::format("'{}' is declared twice", name));
      if (const RequestJson* params = request_field(*f, "parameters"); params && !params->is_object())
        throw bad_param(p + ".function.parameters", "expected a JSON schema object");
      if (const RequestJson* d = request_field(*f, "description"); d && !d->is_string())
        throw bad_param(p + ".function.description", "expected a string");
      // Strict schemas need constrained decoding, which ninfer does not have: refused rather than
      // answered with arguments the schema might not allow.
      if (const RequestJson* st = request_field(*f, "strict"); st && !(st->is_boolean() && !st->get<bool>()))
        throw bad_param(p + ".function.strict", "is not supported (ninfer has no constrained decoding): leave it out "
                                                "or send false");
      s.names.push_back(std::move(name));
      // The tool as the client wrote it, as transformers' template renders a dict.
      s.rendered.push_back(template_json(t));
    }
  }
  if (const RequestJson* pc = request_field(body, "parallel_tool_calls")) {
    if (!pc->is_boolean()) throw bad_param("parallel_tool_calls", "expected true or false");
    s.parallel = pc->get<bool>();
  }
  const RequestJson* choice = request_field(body, "tool_choice");
  if (!choice) return s;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "auto") s.choice = ToolChoice::Auto;
    else if (c == "none") s.choice = ToolChoice::None;
    else if (c == "required") s.choice = ToolChoice::Required;
    else throw bad_param("tool_choice", fmt::format("'{}': expected auto, none, required or a function", c));
  } else if (choice->is_object()) {
    if (required_string(*choice, "type", "tool_choice") != "function")
      throw bad_param("tool_choice.type", "expected \"function\"");
    const RequestJson* f = request_field(*choice, "function");
    if (!f || !f->is_object()) throw bad_param("tool_choice.function", "required object");
    s.choice = ToolChoice::Named;
    s.named = required_string(*f, "name", "tool_choice.function");
    if (std::find(s.names.begin(), s.names.end(), s.named) == s.names.end())
      throw bad_param("tool_choice.function.name", fmt::format("'{}' is not one of the request's tools", s.named));
  } else {
    throw bad_param("tool_choice", "expected a string or an object");
  }
  if ((s.choice == ToolChoice::Required) && s.names.empty())
    throw bad_param("tool_choice", "\"required\" needs tools");
  return s;
}

std::vector<ChatToolCall> parse_openai_tool_calls(const RequestJson& calls, const std::string& param) {
  if (!calls.is_array()) throw bad_param(param, "expected an array");
  std::vector<ChatToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const RequestJson& c = calls[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!c.is_object()) throw bad_param(p, "expected an object");
    const RequestJson* f = request_field(c, "function");
    if (!f || !f->is_object()) throw bad_param(p + ".function", "required object");
    ChatToolCall call{function_name(*f, p + ".function"), {}};
    const RequestJson* args = request_field(*f, "arguments");
    if (!args) throw bad_param(p + ".function.arguments", "required");
    if (args->is_string()) call.arguments = args->get<std::string>();
    else if (args->is_object()) call.arguments = template_json(*args);
    else throw bad_param(p + ".function.arguments", "expected a JSON string");
    out.push_back(std::move(call));
  }
  return out;
}

} // namespace ninfer::tools
