// Qwen's chat format (ChatML with Qwen3's <think> conventions), rendered in C++ exactly as the
// official Qwen3 `chat_template` in tokenizer_config.json renders it, tool definitions and tool
// calls included: the prompt is text, and Tokenizer::encode turns its <|im_start|> etc. into
// the special ids.
//
//   <|im_start|>system\n{system}<|im_end|>\n        <- with tools: {system}\n\n# Tools ... </tools> ...
//   <|im_start|>user\n{question}<|im_end|>\n
//   <|im_start|>assistant\n<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call><|im_end|>\n
//   <|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n
//   <|im_start|>user\n{question}<|im_end|>\n
//   <|im_start|>assistant\n                      <- generation prompt
//   <think>\n\n</think>\n\n                       <- only with enable_thinking = false
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer {

// A function call an assistant turn made. The template writes `arguments` as it is when it is a
// string and through `tojson` otherwise, so the caller passes the exact text to write: an
// OpenAI arguments string verbatim, an object (Anthropic's `input`) as Python's json.dumps
// writes it (ninfer-serve's template_json).
struct ChatToolCall {
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" or "tool"
  std::string content;
  // An assistant turn's reasoning given separately (OpenAI-style `reasoning_content`). When
  // absent, reasoning written inline as <think>...</think> in `content` is split off.
  std::optional<std::string> reasoning_content;
  std::vector<ChatToolCall> tool_calls; // assistant turns only
};

struct ChatOptions {
  // End with "<|im_start|>assistant\n" so the model writes the next assistant turn.
  bool add_generation_prompt = true;
  // Qwen3's thinking switch. Off: the generation prompt is followed by an empty think block,
  // which makes the model answer directly. On: nothing extra; the model opens <think> itself.
  bool enable_thinking = true;
  // The tools the model may call, each as the template's `tool | tojson` writes it (Python's
  // json.dumps: ", " and ": " separators, keys in the client's order, non-ASCII as is). Not
  // empty: the system turn lists them in a <tools> block and says how to call them.
  std::vector<std::string> tools;
};

// Renders a conversation. Reasoning of assistant turns before the last user question is
// dropped (as the official template does); a turn after it keeps its reasoning in a <think>
// block. Throws ninfer::Error for an empty conversation or an unknown role.
std::string format_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {});

// The ids the engine needs to run a Qwen chat: where turns start and end, the end of text, and
// the reasoning markers.
struct ChatTokens {
  int32_t im_start;    // <|im_start|>
  int32_t im_end;      // <|im_end|>: ends an assistant turn (the chat models' EOS)
  int32_t endoftext;   // <|endoftext|>: end of a document (base models' EOS, also the pad token)
  int32_t think;       // <think>
  int32_t think_end;   // </think>
};

// Looks the tokens up; throws ninfer::Error naming the tokenizer file if one is missing.
ChatTokens chat_tokens(const Tokenizer& tokenizer);

} // namespace ninfer
