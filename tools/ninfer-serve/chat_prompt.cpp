#include "chat_prompt.hpp"

#include <algorithm>

#include "api_error.hpp"

namespace ninfer::tools {

bool make_chat_prompt(const std::vector<ChatMessage>& messages, bool thinking, std::optional<int64_t> thinking_budget,
                      const ToolSetup& tools, const LoadedModel& model, GenerationRequest& r,
                      serving::RequestOptions& options) {
  if (!model.tokenizer) throw ApiError(400, "this model has no tokenizer: use /v1/completions with token-id prompts");
  if (model.manifest.chat_template == ChatTemplate::None)
    throw ApiError(400, "this model's manifest sets chat_template: none: use /v1/completions");
  if (messages.empty()) throw bad_param("messages", "no message has anything for the prompt");
  // A forced call starts the answer (tool_choice.hpp): no thinking before it.
  if (tools.forced()) thinking = false;
  const auto im_end = model.tokenizer->token_id("<|im_end|>");
  if (im_end) r.stop.token_ids.insert(*im_end);
  // With thinking on, the reply's <think>...</think> block is split off as reasoning.
  const auto open = model.tokenizer->token_id("<think>"), close = model.tokenizer->token_id("</think>");
  if (thinking && open && close) options.reasoning = serving::ReasoningMarkers{*open, *close};
  if (thinking && thinking_budget) {
    if (!close)
      throw ApiError(400, "a thinking budget ends the reasoning with the </think> token, which this model's tokenizer "
                          "does not have");
    r.thinking_budget = GenerationRequest::ThinkingBudget{*thinking_budget, *close};
  }
  r.prompt_ids = model.tokenizer->encode(format_chat(messages, ChatOptions{true, thinking, tools.rendered}) + tools.prefill());
  // The end of the first message (the system prompt, with the tools' block): other
  // conversations share it, so a hybrid model's prefix cache keeps the state there too.
  if (im_end && messages.size() > 1)
    if (const auto it = std::find(r.prompt_ids.begin(), r.prompt_ids.end(), *im_end); it != r.prompt_ids.end())
      r.state_points.push_back(it - r.prompt_ids.begin() + 1);
  return options.reasoning.has_value();
}

} // namespace ninfer::tools
