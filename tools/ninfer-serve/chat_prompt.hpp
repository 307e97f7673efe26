// A conversation, in either API's words once parsed, made into the engine's prompt: the Qwen
// chat template with the request's tools, the thinking switch, the prefill of a forced tool
// call, and what a chat turn stops at.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "loaded_model.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/serving/engine.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "tool_choice.hpp"

namespace ninfer::tools {

// Throws ApiError (400) for a model without a tokenizer or chat template, or a thinking budget
// on a model whose tokenizer has no </think> token. Sets r.prompt_ids, adds <|im_end|> to
// r.stop, and sets options.reasoning (and r.thinking_budget, when `thinking_budget` is given)
// when the reply will think (thinking on and no forced call, which starts the answer at once).
// Returns whether it thinks.
bool make_chat_prompt(const std::vector<ChatMessage>& messages, bool thinking, std::optional<int64_t> thinking_budget,
                      const ToolSetup& tools, const LoadedModel& model, GenerationRequest& r,
                      serving::RequestOptions& options);

} // namespace ninfer::tools
