// Qwen's chat format (ChatML with Qwen3's <think> conventions), rendered in C++ exactly as the
// official Qwen3 `chat_template` in tokenizer_config.json renders it (without tool definitions
// or tool calls): the prompt is text, and Tokenizer::encode turns its <|im_start|> etc. into the
// special ids.
//
//   <|im_start|>system\n{system}<|im_end|>\n
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

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" or "tool"
  std::string content;
  // An assistant turn's reasoning given separately (OpenAI-style `reasoning_content`). When
  // absent, reasoning written inline as <think>...</think> in `content` is split off.
  std::optional<std::string> reasoning_content;
};

struct ChatOptions {
  // End with "<|im_start|>assistant\n" so the model writes the next assistant turn.
  bool add_generation_prompt = true;
  // Qwen3's thinking switch. Off: the generation prompt is followed by an empty think block,
  // which makes the model answer directly. On: nothing extra; the model opens <think> itself.
  bool enable_thinking = true;
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
