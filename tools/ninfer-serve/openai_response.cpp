#include "openai_response.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>

namespace ninfer::tools {

using nlohmann::json;

namespace {

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Chat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

// What a token stands for: its bytes (possibly part of a UTF-8 character; JSON output makes
// such a string valid with U+FFFD, `bytes` keeps them exact), or "token_id:N" without a
// tokenizer (as vLLM's return_tokens_as_token_ids).
std::string token_text(const ResponseMeta& m, int32_t id) {
  if (!m.tokenizer) return "token_id:" + std::to_string(id);
  try {
    return m.tokenizer->token_bytes(id);
  } catch (const std::exception&) {
    return {}; // an id without a token (padded vocabulary)
  }
}

json token_bytes(const std::string& t) {
  json b = json::array();
  for (unsigned char c : t) b.push_back(static_cast<int>(c));
  return b;
}

json chat_entry(const ResponseMeta& m, int32_t id, float logprob) {
  const std::string t = token_text(m, id);
  return json{{"token", t}, {"logprob", logprob}, {"bytes", token_bytes(t)}};
}

json chunk_base(const ResponseMeta& m) {
  return json{{"id", m.id}, {"object", object_name(m.endpoint, true)}, {"created", m.created}, {"model", m.model}};
}

// A chat choice's message: the answer's text, and its tool calls when the request has tools.
json chat_message(const ResponseMeta& m, const serving::ServeResult& r, std::string& finish_reason) {
  json message{{"role", "assistant"}, {"content", r.text}};
  if (m.tools) {
    // The parser's content, as the stream sends it: a forced call's prefill that the model did
    // not turn into a call is part of it (the answer's text alone is not).
    const ParsedAnswer a = parse_tool_calls(r.text, *m.tools);
    message["content"] = a.content;
    if (!a.calls.empty()) {
      json calls = json::array();
      for (const ParsedToolCall& c : a.calls)
        calls.push_back(json{{"id", new_tool_call_id()},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      if (a.content.empty()) message["content"] = nullptr;
      message["tool_calls"] = calls;
      finish_reason = chat_finish_reason(finish_reason, a.calls.size());
    }
  }
  if (m.reasoning) message["reasoning_content"] = r.reasoning.empty() ? json(nullptr) : json(r.reasoning);
  return message;
}

} // namespace

std::string new_tool_call_id() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::string chat_finish_reason(const std::string& finish_reason, size_t calls) {
  return calls > 0 && finish_reason == "stop" ? "tool_calls" : finish_reason;
}

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  const std::string prefix = endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-";
  return {endpoint, prefix + std::to_string(created) + "-" + std::to_string(counter++), model, created};
}

json logprobs_json(const ResponseMeta& m, std::span<const int32_t> ids, std::span<const float> logprobs,
                   std::span<const std::vector<TokenLogprob>> top, int64_t& text_offset) {
  if (m.endpoint == Endpoint::Chat) {
    json content = json::array();
    for (size_t i = 0; i < ids.size(); ++i) {
      json e = chat_entry(m, ids[i], logprobs[i]);
      json alts = json::array();
      for (const TokenLogprob& a : top[i]) alts.push_back(chat_entry(m, a.id, a.logprob));
      e["top_logprobs"] = alts;
      content.push_back(e);
    }
    return json{{"content", content}};
  }
  // Legacy: top_logprobs maps token text to logprob, the chosen token always among them (so
  // up to K+1 entries, as OpenAI documents); text_offset counts bytes of the token texts.
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string t = token_text(m, ids[i]);
    tokens.push_back(t);
    lps.push_back(logprobs[i]);
    json alts = json::object();
    for (const TokenLogprob& a : top[i]) {
      const std::string at = token_text(m, a.id);
      if (!alts.contains(at)) alts[at] = a.logprob;
    }
    if (!alts.contains(t)) alts[t] = logprobs[i];
    tops.push_back(alts);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(t.size());
  }
  return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

namespace {

// The echoed prompt's text: decoded by the tokenizer (empty without one).
std::string echo_text(const ResponseMeta& m) {
  return m.tokenizer && m.echo_prompt ? m.tokenizer->decode(*m.echo_prompt) : std::string();
}

// Legacy logprobs of an echoed prompt: each prompt token with its log-probability after the
// ones before (the first has none: null, as OpenAI's), its alternatives trimmed to the asked K
// and the token itself always among them; `text_offset` continues into the completion.
json echoed_logprobs(const ResponseMeta& m, const std::vector<float>& logprobs,
                     const std::vector<std::vector<TokenLogprob>>& top_logprobs, int64_t& text_offset) {
  const std::vector<int32_t>& ids = *m.echo_prompt;
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t j = 0; j < ids.size(); ++j) {
    const std::string t = token_text(m, ids[j]);
    tokens.push_back(t);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(t.size());
    if (j == 0 || j - 1 >= logprobs.size()) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(logprobs[j - 1]);
    json alts = json::object();
    const std::vector<TokenLogprob>& top = top_logprobs[j - 1];
    for (size_t a = 0; a < top.size() && static_cast<int64_t>(a) < m.top_logprobs; ++a) {
      const std::string at = token_text(m, top[a].id);
      if (!alts.contains(at)) alts[at] = top[a].logprob;
    }
    if (!alts.contains(t)) alts[t] = logprobs[j - 1];
    tops.push_back(alts);
  }
  return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

} // namespace

json echo_chunk(const ResponseMeta& m, int64_t index, const serving::PromptScores* scores, int64_t& text_offset) {
  json chunk = text_chunk(m, echo_text(m), false, false, index);
  if (scores) chunk["choices"][0]["logprobs"] = echoed_logprobs(m, scores->logprobs, scores->top_logprobs, text_offset);
  return chunk;
}

json usage_json(std::span<const serving::ServeResult> choices) {
  const int64_t prompt = choices.empty() ? 0 : choices.front().prompt_tokens;
  int64_t completion = 0;
  for (const serving::ServeResult& r : choices) completion += static_cast<int64_t>(r.generated_ids.size());
  // OpenAI's field for prompt tokens served from a cache: here, read from a slot's earlier
  // request (choices share the prompt, each in its own slot: the most any of them read).
  int64_t cached = 0;
  for (const serving::ServeResult& r : choices) cached = std::max(cached, r.cached_tokens);
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json completion_json(const ResponseMeta& m, std::span<const serving::ServeResult> choices, bool token_ids) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const serving::ServeResult& r = choices[i];
    json choice{{"index", i}, {"finish_reason", r.finish_reason}, {"logprobs", nullptr}};
    if (m.endpoint == Endpoint::Chat) {
      std::string finish = r.finish_reason;
      choice["message"] = chat_message(m, r, finish);
      choice["finish_reason"] = finish;
    } else {
      choice["text"] = m.echo_prompt ? echo_text(m) + r.text : r.text;
    }
    if (m.logprobs) {
      int64_t offset = 0;
      if (m.echo_prompt) { // the prompt's entries, then the completion's, one text_offset running on
        json lp = echoed_logprobs(m, r.prompt_logprobs, r.prompt_top_logprobs, offset);
        const json generated = logprobs_json(m, r.generated_ids, r.logprobs, r.top_logprobs, offset);
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (const json& e : generated[key]) lp[key].push_back(e);
        choice["logprobs"] = std::move(lp);
      } else {
        choice["logprobs"] = logprobs_json(m, r.generated_ids, r.logprobs, r.top_logprobs, offset);
      }
    }
    if (token_ids) choice["token_ids"] = r.generated_ids;
    out.push_back(std::move(choice));
  }
  return json{{"id", m.id},       {"object", object_name(m.endpoint, false)},
              {"created", m.created}, {"model", m.model},
              {"choices", out},   {"usage", usage_json(choices)}};
}

json text_chunk(const ResponseMeta& m, const std::string& text, bool first, bool reasoning, int64_t index) {
  json choice{{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::Chat) {
    json delta{{reasoning ? "reasoning_content" : "content", text}};
    if (first) delta["role"] = "assistant";
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json c = chunk_base(m);
  c["choices"] = json::array({choice});
  return c;
}

json tool_call_start_chunk(const ResponseMeta& m, int64_t index, size_t call, const std::string& id,
                           const std::string& name) {
  const json tc{{"index", call}, {"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", ""}}}};
  json c = chunk_base(m);
  c["choices"] = json::array({json{{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr},
                                   {"delta", {{"tool_calls", json::array({tc})}}}}});
  return c;
}

json tool_call_arguments_chunk(const ResponseMeta& m, int64_t index, size_t call, const std::string& arguments) {
  const json tc{{"index", call}, {"function", {{"arguments", arguments}}}};
  json c = chunk_base(m);
  c["choices"] = json::array({json{{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr},
                                   {"delta", {{"tool_calls", json::array({tc})}}}}});
  return c;
}

json finish_chunk(const ResponseMeta& m, const std::string& finish_reason, int64_t index) {
  json choice{{"index", index}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::Chat) choice["delta"] = json::object();
  else choice["text"] = "";
  json c = chunk_base(m);
  c["choices"] = json::array({choice});
  return c;
}

json usage_chunk(const ResponseMeta& m, std::span<const serving::ServeResult> choices) {
  json c = chunk_base(m);
  c["choices"] = json::array();
  c["usage"] = usage_json(choices);
  return c;
}

} // namespace ninfer::tools
