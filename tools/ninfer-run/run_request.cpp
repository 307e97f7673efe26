#include "run_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {

std::string prompt_text(const RunOptions& o) {
  if (o.prompt) return *o.prompt;
  if (!o.prompt_file) return {};
  if (*o.prompt_file == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  // A folder opens as a stream that reads nothing; a FIFO (`<(...)`) is read like a file.
  std::error_code ec;
  if (std::filesystem::is_directory(*o.prompt_file, ec))
    throw Error(fmt::format("--prompt-file {}: is a folder; point at the file itself", *o.prompt_file));
  std::ifstream in(*o.prompt_file, std::ios::binary);
  if (!in) throw Error(fmt::format("--prompt-file {}: cannot be read", *o.prompt_file));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("--prompt-file {}: cannot be read", *o.prompt_file));
  return text.str();
}

std::vector<int32_t> one_shot_prompt_ids(const RunOptions& o, const Manifest& m, const Tokenizer* tok) {
  if (!o.prompt_ids.empty()) {
    std::vector<int32_t> ids;
    for (int64_t id : o.prompt_ids) {
      if (id < 0 || id > INT32_MAX) throw Error(fmt::format("--prompt-ids: {} is not a token id", id));
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }
  std::string text = prompt_text(o);
  if (!tok)
    throw Error(fmt::format("a text prompt needs a tokenizer and {} has none: set `tokenizer:` in the manifest or "
                            "use --prompt-ids",
                            m.checkpoint.string()));
  if (o.chat) {
    if (m.chat_template == ChatTemplate::None)
      throw Error(fmt::format("--chat: the manifest sets chat_template: none ({})", m.where("chat_template")));
    std::vector<ChatMessage> msgs;
    if (o.system) msgs.push_back({"system", *o.system, std::nullopt});
    msgs.push_back({"user", text, std::nullopt});
    text = format_chat(msgs, ChatOptions{true, !o.no_think});
  }
  std::vector<int32_t> ids = tok->encode(text);
  if (ids.empty()) throw Error("the prompt is empty: it encodes to no tokens");
  return ids;
}

int64_t one_shot_context(int64_t prompt_tokens, int64_t max_new, int64_t cap) {
  const int64_t need = prompt_tokens + std::max<int64_t>(max_new, 1);
  const int64_t rounded = (need + kContextGranule - 1) / kContextGranule * kContextGranule;
  return std::min(rounded, cap);
}

GenerationRequest make_request(const RunOptions& o, const Manifest& m, const ModelConfig& cfg, const Tokenizer* tok) {
  GenerationRequest r;
  r.sampling = m.sampling;
  if (o.greedy) r.sampling.temperature = 0;
  if (o.temperature) r.sampling.temperature = *o.temperature;
  if (o.top_k) r.sampling.top_k = *o.top_k;
  if (o.top_p) r.sampling.top_p = *o.top_p;
  if (o.min_p) r.sampling.min_p = *o.min_p;
  if (o.repetition_penalty) r.sampling.repetition_penalty = *o.repetition_penalty;
  if (o.presence_penalty) r.sampling.presence_penalty = *o.presence_penalty;
  if (o.frequency_penalty) r.sampling.frequency_penalty = *o.frequency_penalty;
  if (o.seed) r.sampling.seed = *o.seed;
  r.sampling.top_logprobs = o.logprobs.value_or(0);
  for (const auto& [id, bias] : o.logit_bias) {
    if (id >= cfg.vocab_size)
      throw Error(fmt::format("--logit-bias: token {} is outside the vocabulary (0..{})", id, cfg.vocab_size - 1));
    r.sampling.logit_bias.emplace_back(static_cast<TokenId>(id), bias);
  }
  try {
    r.sampling.validate();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  r.prompt_logprobs = o.echo ? r.sampling.top_logprobs : 0;
  r.max_new_tokens = o.max_new.value_or(m.max_new_tokens);
  r.stop.strings = o.stop;
  if (!r.stop.strings.empty() && !tok) throw Error("--stop needs a tokenizer and this model has none: use --stop-id");
  for (int64_t id : o.stop_ids) r.stop.token_ids.insert(static_cast<int32_t>(id));
  if (!o.ignore_eos) {
    for (int64_t id : cfg.eos_token_ids) r.stop.token_ids.insert(static_cast<int32_t>(id));
    // A chat turn ends at <|im_end|> even when config.json names another EOS (base models).
    if (tok && o.chat_format())
      if (auto id = tok->token_id("<|im_end|>")) r.stop.token_ids.insert(*id);
  }
  return r;
}

} // namespace ninfer::tools
