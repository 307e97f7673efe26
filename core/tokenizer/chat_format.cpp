#include "ninfer/tokenizer/chat_format.hpp"

#include <fmt/format.h>

#include "ninfer/support/error.hpp"

namespace ninfer {

namespace {

// Python's str.lstrip('\n'), str.rstrip('\n') and str.strip('\n'), which the template uses.
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_newlines(std::string_view s) { return lstrip_newlines(rstrip_newlines(s)); }

// s.split(sep)[-1] and s.split(sep)[0].
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}
std::string_view before_first(std::string_view s, std::string_view sep) { return s.substr(0, s.find(sep)); }

bool is_tool_response(std::string_view content) {
  return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

// The last user message that is a real question rather than tool output wrapped as a user turn;
// assistant turns after it are the current answer (their reasoning is kept).
size_t last_query_index(const std::vector<ChatMessage>& messages) {
  for (size_t i = messages.size(); i-- > 0;)
    if (messages[i].role == "user" && !is_tool_response(messages[i].content)) return i;
  return messages.size() - 1;
}

void render_assistant(const std::vector<ChatMessage>& messages, size_t i, size_t last_query, std::string& out) {
  const ChatMessage& m = messages[i];
  std::string_view content = m.content;
  std::string_view reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (content.find("</think>") != std::string_view::npos) {
    content = lstrip_newlines(after_last(m.content, "</think>"));
    reasoning = lstrip_newlines(after_last(rstrip_newlines(before_first(m.content, "</think>")), "<think>"));
  }
  const bool is_last = i + 1 == messages.size();
  out += "<|im_start|>assistant\n";
  if (i > last_query && (is_last || !reasoning.empty())) {
    out += "<think>\n";
    out += strip_newlines(reasoning);
    out += "\n</think>\n\n";
    out += lstrip_newlines(content);
  } else {
    out += content;
  }
  // Each call on a line of its own; the first one directly after the turn's header when the
  // turn has no text (the template tests the content before its newlines are stripped).
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    if (k > 0 || !content.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": \"";
    out += m.tool_calls[k].name;
    out += "\", \"arguments\": ";
    out += m.tool_calls[k].arguments;
    out += "}\n</tool_call>";
  }
  out += "<|im_end|>\n";
}

// The system turn that lists the tools, with the first message's system text before it.
void render_tools_system(const std::vector<ChatMessage>& messages, const std::vector<std::string>& tools,
                         std::string& out) {
  out += "<|im_start|>system\n";
  if (messages.front().role == "system") out += messages.front().content + "\n\n";
  out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const std::string& t : tools) out += "\n" + t;
  out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
         "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
         "<args-json-object>}\n</tool_call><|im_end|>\n";
}

// Consecutive tool results share one user turn, each in its own <tool_response> block.
void render_tool(const std::vector<ChatMessage>& messages, size_t i, std::string& out) {
  if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n";
  out += messages[i].content;
  out += "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
}

} // namespace

std::string format_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  if (messages.empty()) throw Error("a chat needs at least one message");
  const size_t last_query = last_query_index(messages);
  std::string out;
  // With tools, a leading system message becomes part of the tools' system turn.
  size_t first = 0;
  if (!options.tools.empty()) {
    render_tools_system(messages, options.tools, out);
    if (messages.front().role == "system") first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || m.role == "system") {
      // A system message anywhere but first is rendered like any other turn, as the template does.
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      render_assistant(messages, i, last_query, out);
    } else if (m.role == "tool") {
      render_tool(messages, i, out);
    } else {
      throw Error(fmt::format("chat message {} has role '{}'; expected system, user, assistant or tool", i, m.role));
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

ChatTokens chat_tokens(const Tokenizer& tokenizer) {
  return ChatTokens{tokenizer.require_token_id("<|im_start|>"), tokenizer.require_token_id("<|im_end|>"),
                    tokenizer.require_token_id("<|endoftext|>"), tokenizer.require_token_id("<think>"),
                    tokenizer.require_token_id("</think>")};
}

} // namespace ninfer
