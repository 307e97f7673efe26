// The OpenAI request fields beyond the basics, against the real ninfer-serve process:
// logprobs against transformers' logits through a float64 log-softmax, `n` choices,
// `max_completion_tokens`, `seed`, `stop` as a string, `user` in the request log, and the
// thinking switch's type errors, and a next turn read partly from its slot.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "demo_checkpoint.hpp"
#include "ninfer/checkpoint/safetensors_file.hpp"
#include "process.hpp"
#include "serve_client.hpp"
#include "server_process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;
using nlohmann::json;

namespace {

constexpr double kGreedyMargin = 1e-2; // reference steps at or below this margin may flip
// Engine logits are within 1e-3 of transformers' (fixtures README); a logprob is a logit minus
// the log-sum-exp of its row, each off by at most that.
constexpr double kLogprobVsReference = 2e-3;

json reference(const std::string& fixture) {
  std::ifstream in(fixtures_dir() / fixture / "reference.json");
  return json::parse(in);
}

std::vector<std::string> tiny_qwen3_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu",
                             "--max-context", "256", "--max-concurrency", "2", "--prefill-chunk", "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json ids_request(const json& prompt, int64_t max_tokens) {
  return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"return_token_ids", true}};
}

// log_softmax of one row of transformers' logits, in float64.
std::vector<double> log_softmax(const float* row, int64_t vocab) {
  double mx = row[0], sum = 0;
  for (int64_t v = 0; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(vocab);
  for (int64_t v = 0; v < vocab; ++v) out[v] = row[v] - lse;
  return out;
}

// "token_id:N" (a model without tokenizer) -> N.
int64_t token_id(const std::string& name) { return std::stoll(name.substr(name.find(':') + 1)); }

// Each choice's token ids from a stream with return_token_ids, and its finish reason.
std::map<int64_t, std::pair<json, std::string>> streamed_choices(const std::string& text, json* usage = nullptr) {
  std::map<int64_t, std::pair<json, std::string>> out;
  for (const std::string& e : sse_data(text)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    if (usage && chunk.contains("usage") && chunk["usage"].is_object()) *usage = chunk["usage"];
    for (const json& c : chunk["choices"]) {
      auto& [ids, finish] = out[c["index"].get<int64_t>()];
      if (!ids.is_array()) ids = json::array();
      for (const json& id : c.value("token_ids", json::array())) ids.push_back(id);
      if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    }
  }
  return out;
}

} // namespace

// Completions logprobs (streamed and not) are transformers' teacher-forced logits of the
// greedy continuation through a float64 log-softmax: the chosen token's and each alternative's.
TEST(NinferServe, CompletionLogprobsAreTheReferenceLogSoftmax) {
  const json ref = reference("tiny-qwen3");
  const SafetensorsFile logits = SafetensorsFile::open(fixtures_dir() / "tiny-qwen3" / "reference.safetensors");
  ServerProcess server(tiny_qwen3_args());
  auto c = server.client();
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    const json& cs = ref["cases"][i];
    const TensorView& rows = logits.tensor("case" + std::to_string(i) + ".full_logits"); // [prompt + greedy, vocab]
    const int64_t vocab = rows.shape[1];
    const size_t prompt = cs["prompt_ids"].size();
    json req = ids_request(cs["prompt_ids"], 8);
    req["logprobs"] = 3;
    const Reply r = post(*c, "/v1/completions", req);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    json sreq = req;
    sreq["stream"] = true;
    const auto [status, text] = post_stream(*c, "/v1/completions", sreq);
    ASSERT_EQ(status, 200);
    json streamed{{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}};
    for (const std::string& e : sse_data(text)) {
      if (e == "[DONE]") continue;
      const json chunk = json::parse(e);
      if (chunk["choices"].empty() || !chunk["choices"][0]["logprobs"].is_object()) continue;
      const json& l = chunk["choices"][0]["logprobs"];
      for (size_t k = 0; k < l["tokens"].size(); ++k) {
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs"}) streamed[key].push_back(l[key][k]);
      }
    }
    const json& lp = r.body["choices"][0]["logprobs"];
    for (const json* shape : std::initializer_list<const json*>{&lp, &streamed}) {
      const json &tokens = (*shape)["tokens"], &lps = (*shape)["token_logprobs"], &tops = (*shape)["top_logprobs"];
      ASSERT_EQ(tokens.size(), 8u);
      size_t compared = 0;
      for (size_t s = 0; s < 8; ++s) {
        // The teacher-forced rows follow the reference's greedy ids: valid while ours agree.
        if (token_id(tokens[s]) != cs["greedy_ids"][s].get<int64_t>() || cs["greedy_top2_margin"][s] <= kGreedyMargin)
          break;
        const float* row = static_cast<const float*>(rows.data) + (prompt - 1 + s) * vocab;
        const std::vector<double> expected = log_softmax(row, vocab);
        EXPECT_NEAR(lps[s].get<double>(), expected[token_id(tokens[s])], kLogprobVsReference) << "case " << i << " step " << s;
        ASSERT_EQ(tops[s].size(), 3u);
        for (const auto& [name, v] : tops[s].items())
          EXPECT_NEAR(v.get<double>(), expected[token_id(name)], kLogprobVsReference) << "case " << i << " step " << s;
        ++compared;
      }
      EXPECT_GT(compared, 0u) << "case " << i;
    }
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// `n` choices: greedy, each is transformers' continuation; seeded, choice i is the n=1 request
// with seed + i; streamed, each index carries its own tokens and finish; usage counts the
// prompt once and every choice's tokens; n beyond the limit is 400.
TEST(NinferServe, SeveralChoicesEachEqualTheirOwnRequest) {
  const json ref = reference("tiny-qwen3");
  const json& cs = ref["cases"][1];
  ServerProcess server(tiny_qwen3_args());
  auto c = server.client();
  json req = ids_request(cs["prompt_ids"], 6);
  req["n"] = 3;
  const Reply r = post(*c, "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["choices"].size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const json& choice = r.body["choices"][k];
    EXPECT_EQ(choice["index"], k);
    for (size_t s = 0; s < 6 && cs["greedy_top2_margin"][s] > kGreedyMargin; ++s)
      EXPECT_EQ(choice["token_ids"][s], cs["greedy_ids"][s]) << "choice " << k << " step " << s;
  }
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], cs["prompt_ids"].size());
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 18);

  json sampled = ids_request(cs["prompt_ids"], 10);
  sampled["temperature"] = 1.0;
  sampled["ignore_eos"] = true;
  sampled["seed"] = 1234;
  sampled["n"] = 2;
  const Reply two = post(*c, "/v1/completions", sampled);
  ASSERT_EQ(two.status, 200) << two.body.dump();
  sampled["n"] = 1;
  const Reply seed0 = post(*c, "/v1/completions", sampled);
  const Reply seed0_again = post(*c, "/v1/completions", sampled);
  sampled["seed"] = 1235;
  const Reply seed1 = post(*c, "/v1/completions", sampled);
  EXPECT_EQ(seed0.body["choices"][0]["token_ids"], seed0_again.body["choices"][0]["token_ids"]) << "seed reproduces";
  EXPECT_EQ(two.body["choices"][0]["token_ids"], seed0.body["choices"][0]["token_ids"]);
  EXPECT_EQ(two.body["choices"][1]["token_ids"], seed1.body["choices"][0]["token_ids"]);
  EXPECT_NE(two.body["choices"][0]["token_ids"], two.body["choices"][1]["token_ids"]) << "choices differ";

  json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  const auto [status, text] = post_stream(*c, "/v1/completions", sreq);
  ASSERT_EQ(status, 200);
  json usage;
  const auto streamed = streamed_choices(text, &usage);
  ASSERT_EQ(streamed.size(), 3u) << text;
  for (const auto& [index, choice] : streamed) {
    EXPECT_EQ(choice.first, r.body["choices"][index]["token_ids"]) << "choice " << index;
    EXPECT_EQ(choice.second, "length");
  }
  // Three choices in two slots: the second copies the first's prompt; the third waits for a slot,
  // which then holds the prompt, and reads all but its last token from it.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], cs["prompt_ids"].size() - 1);
  EXPECT_EQ(usage, r.body["usage"]);
  EXPECT_EQ(sse_data(text).back(), "[DONE]");

  req["n"] = 17;
  const Reply bad = post(*c, "/v1/completions", req);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "n");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

namespace {

// The value of counter `name` in /metrics text (-1 when absent).
int64_t counter(const std::string& metrics, const std::string& name) {
  const size_t at = metrics.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(metrics.substr(at + name.size() + 2));
}

} // namespace

// `n` = 3 reads its prompt once: /metrics counts the prompt's tokens computed once and two
// choices that copied it. Greedy, the three choices are the n = 1 reply; seeded, choice i is the
// n = 1 request with seed + i (the server reads every prompt whole, so the n = 1 requests read
// theirs as the first choice does).
TEST(NinferServe, ChoicesComputeThePromptOnceAndEachIsItsOwnRequest) {
  const json ref = reference("tiny-qwen3");
  const json& prompt = ref["cases"][2]["prompt_ids"];
  ServerProcess server({"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu", "--max-context",
                        "256", "--max-concurrency", "3", "--prefill-chunk", "5", "--no-prefix-cache"});
  auto c = server.client();
  const auto metrics = [&] {
    const auto r = c->Get("/metrics");
    return r && r->status == 200 ? r->body : std::string("(no reply)");
  };
  const std::string before = metrics();
  json req = ids_request(prompt, 8);
  req["ignore_eos"] = true;
  req["n"] = 3;
  const Reply three = post(*c, "/v1/completions", req);
  ASSERT_EQ(three.status, 200) << three.body.dump();
  const std::string after = metrics();
  EXPECT_EQ(counter(after, "ninfer_prefill_tokens_total") - counter(before, "ninfer_prefill_tokens_total"),
            static_cast<int64_t>(prompt.size()))
      << after;
  EXPECT_EQ(counter(after, "ninfer_forked_choices_total") - counter(before, "ninfer_forked_choices_total"), 2)
      << after;
  EXPECT_EQ(three.body["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(three.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << "copied, not cached";
  req["n"] = 1;
  const Reply one = post(*c, "/v1/completions", req);
  ASSERT_EQ(one.status, 200) << one.body.dump();
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ(three.body["choices"][k]["token_ids"], one.body["choices"][0]["token_ids"]) << "choice " << k;

  json sampled = req;
  sampled["temperature"] = 1.0;
  sampled["seed"] = 4242;
  sampled["n"] = 3;
  const Reply seeded = post(*c, "/v1/completions", sampled);
  ASSERT_EQ(seeded.status, 200) << seeded.body.dump();
  sampled["n"] = 1;
  for (int64_t k = 0; k < 3; ++k) {
    sampled["seed"] = 4242 + k;
    const Reply own = post(*c, "/v1/completions", sampled);
    ASSERT_EQ(own.status, 200) << own.body.dump();
    EXPECT_EQ(seeded.body["choices"][k]["token_ids"], own.body["choices"][0]["token_ids"]) << "choice " << k;
  }
  EXPECT_NE(seeded.body["choices"][0]["token_ids"], seeded.body["choices"][1]["token_ids"]) << "choices differ";
  EXPECT_EQ(counter(metrics(), "ninfer_forked_choices_total") - counter(before, "ninfer_forked_choices_total"), 4);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// max_completion_tokens (OpenAI's newer name for max_tokens), given alone or agreeing with
// max_tokens; `user` accepted and written to the request log; wrong types name their field.
TEST(NinferServe, MaxCompletionTokensAndUser) {
  const fs::path log = fs::temp_directory_path() / ("ninfer-api-log-" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(log);
  {
    ServerProcess server(tiny_qwen3_args({"--request-log", log.string()}));
    auto c = server.client();
    json req = ids_request({1, 2, 3}, 4);
    req.erase("max_tokens");
    req["max_completion_tokens"] = 5;
    req["ignore_eos"] = true;
    req["user"] = "alice@example";
    Reply r = post(*c, "/v1/completions", req);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 5);
    req["max_tokens"] = 5;
    EXPECT_EQ(post(*c, "/v1/completions", req).status, 200) << "both names, same value";
    req["max_tokens"] = 6;
    r = post(*c, "/v1/completions", req);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "max_completion_tokens");
    req["max_tokens"] = 5;
    req["max_completion_tokens"] = 300; // beyond the 256-token context
    r = post(*c, "/v1/completions", req);
    EXPECT_EQ(r.status, 400);
    req["max_tokens"] = 300;
    r = post(*c, "/v1/completions", req);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "max_completion_tokens");
    EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded");
    req["max_tokens"] = 5;
    req["max_completion_tokens"] = 5;
    req["user"] = 7;
    r = post(*c, "/v1/completions", req);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "user");
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  std::ifstream in(log);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  fs::remove(log);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["user"], "alice@example");
  EXPECT_EQ(lines[0]["decode_tokens"], 5);
}

// On a chat model: `stop` as a plain string cuts the reply where the string begins, n > 1
// chat choices each equal the n = 1 greedy reply, and the thinking switch's wrong types are
// 400s naming the field.
TEST(NinferServe, ChatStopStringChoicesAndThinkingSwitchTypes) {
  ServerProcess server({"--checkpoint", demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN).string(), "--device", "cpu",
                        "--max-concurrency", "2"});
  auto c = server.client();
  const json req{{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                 {"max_tokens", 12},
                 {"temperature", 0},
                 {"ignore_eos", true}, // a random-weight model may end at once
                 {"chat_template_kwargs", {{"enable_thinking", false}}}};
  const Reply whole = post(*c, "/v1/chat/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const std::string content = whole.body["choices"][0]["message"]["content"];
  ASSERT_GE(content.size(), 2u);
  // The reply's last whole UTF-8 character as the stop string.
  size_t last = content.size() - 1;
  while (last > 0 && (static_cast<unsigned char>(content[last]) & 0xC0) == 0x80) --last;
  const std::string stop = content.substr(last);
  json stop_req = req;
  stop_req["stop"] = stop;
  const Reply cut = post(*c, "/v1/chat/completions", stop_req);
  ASSERT_EQ(cut.status, 200) << cut.body.dump();
  EXPECT_EQ(cut.body["choices"][0]["message"]["content"], content.substr(0, content.find(stop)));
  EXPECT_EQ(cut.body["choices"][0]["finish_reason"], "stop");

  json n_req = req;
  n_req["n"] = 2;
  const Reply two = post(*c, "/v1/chat/completions", n_req);
  ASSERT_EQ(two.status, 200) << two.body.dump();
  ASSERT_EQ(two.body["choices"].size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(two.body["choices"][k]["index"], k);
    EXPECT_EQ(two.body["choices"][k]["message"], whole.body["choices"][0]["message"]);
  }

  for (const json& kwargs : {json(3), json{{"enable_thinking", "no"}}}) {
    json bad = req;
    bad["chat_template_kwargs"] = kwargs;
    const Reply b = post(*c, "/v1/chat/completions", bad);
    EXPECT_EQ(b.status, 400) << kwargs;
    EXPECT_EQ(b.body["error"]["param"], kwargs.is_object() ? "chat_template_kwargs.enable_thinking" : "chat_template_kwargs");
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// thinking_token_budget (vLLM's field) and Anthropic's thinking.budget_tokens: the reply's
// token after the budget is </think>, forced (logprob 0), the reply still runs to max_tokens,
// its first tokens are those of the same request without a budget; a bad budget is 400 naming
// the field.
TEST(NinferServe, ThinkingBudgetForcesTheEndOfTheReasoning) {
  ServerProcess server({"--checkpoint", demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN).string(), "--device", "cpu",
                        "--max-concurrency", "2"});
  auto c = server.client();
  const json req{{"messages", {{{"role", "user"}, {"content", "Think about the sea."}}}},
                 {"max_tokens", 12},
                 {"temperature", 0},
                 {"ignore_eos", true},
                 {"logprobs", true}};
  const Reply free = post(*c, "/v1/chat/completions", req);
  ASSERT_EQ(free.status, 200) << free.body.dump();
  json budgeted = req;
  budgeted["thinking_token_budget"] = 4;
  const Reply cut = post(*c, "/v1/chat/completions", budgeted);
  ASSERT_EQ(cut.status, 200) << cut.body.dump();
  const json& want = free.body["choices"][0]["logprobs"]["content"];
  const json& got = cut.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(got.size(), 12u) << cut.body.dump();
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(got[k]["token"], want[k]["token"]) << "token " << k;
  for (size_t k = 0; k < 4; ++k) ASSERT_NE(want[k]["token"], "</think>") << "the free reply closed its block itself";
  EXPECT_EQ(got[4]["token"], "</think>");
  EXPECT_EQ(got[4]["logprob"].get<double>(), 0.0);
  EXPECT_EQ(cut.body["usage"]["completion_tokens"], 12);

  const json anthropic{{"model", cut.body["model"]},
                       {"max_tokens", 12},
                       {"temperature", 0},
                       {"messages", req["messages"]},
                       {"thinking", {{"type", "enabled"}, {"budget_tokens", 4}}}};
  const Reply a = post(*c, "/v1/messages", anthropic);
  ASSERT_EQ(a.status, 200) << a.body.dump();
  // The same reply through the other API: its thinking and text blocks are the chat's
  // reasoning_content and content.
  std::string thinking, text;
  for (const json& b : a.body["content"]) {
    if (b["type"] == "thinking") thinking += b["thinking"].get<std::string>();
    if (b["type"] == "text") text += b["text"].get<std::string>();
  }
  const json& rc = cut.body["choices"][0]["message"]["reasoning_content"];
  EXPECT_EQ(thinking, rc.is_string() ? rc.get<std::string>() : "") << a.body.dump() << "\n" << cut.body.dump();
  EXPECT_EQ(text, cut.body["choices"][0]["message"]["content"].get<std::string>()) << a.body.dump();
  EXPECT_EQ(a.body["usage"]["output_tokens"], 12);

  for (const json& bad : {json(0), json("4"), json(1.5)}) {
    json b = req;
    b["thinking_token_budget"] = bad;
    const Reply r = post(*c, "/v1/chat/completions", b);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.body["error"]["param"], "thinking_token_budget") << bad;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Four clients at once whose prompts share a system prompt that an earlier request computed, on a
// server with two slots: each reads at least the system prompt's full KV block from the prefix
// cache or a slot (usage and /metrics say how many), and each gets the greedy ids of a server
// that reads every prompt whole.
TEST(NinferServe, ConcurrentClientsShareASystemPromptThroughThePrefixCache) {
  auto rng = fresh_rng("serve prefix cache");
  std::uniform_int_distribution<int64_t> id(0, 511); // tiny-qwen3's vocabulary
  const auto ids = [&](size_t n) {
    json v = json::array();
    for (size_t i = 0; i < n; ++i) v.push_back(id(rng));
    return v;
  };
  const json system = ids(70); // one full block of 64 positions
  const auto with_system = [&](const json& tail) {
    json p = system;
    for (const json& t : tail) p.push_back(t);
    return p;
  };
  std::vector<json> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(with_system(ids(3 + static_cast<size_t>(i))));
  const auto run = [&](const std::vector<std::string>& extra, std::vector<Reply>& replies) {
    ServerProcess server(tiny_qwen3_args(extra));
    auto c = server.client();
    replies.assign(prompts.size(), {});
    replies[0] = post(*c, "/v1/completions", ids_request(prompts[0], 6));
    std::vector<std::thread> clients;
    for (size_t i = 1; i < prompts.size(); ++i)
      clients.emplace_back([&, i] {
        auto ci = server.client();
        replies[i] = post(*ci, "/v1/completions", ids_request(prompts[i], 6));
      });
    for (auto& t : clients) t.join();
    const auto metrics = c->Get("/metrics");
    EXPECT_EQ(server.stop(), 0) << server.log();
    return metrics ? metrics->body : std::string();
  };
  std::vector<Reply> warm, cold;
  const std::string metrics = run({}, warm);
  run({"--no-prefix-cache"}, cold);
  int64_t cached = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(warm[i].status, 200) << warm[i].body.dump();
    ASSERT_EQ(cold[i].status, 200) << cold[i].body.dump();
    const int64_t n = warm[i].body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    if (i > 0) EXPECT_GE(n, 64) << "client " << i;
    cached += n;
    EXPECT_EQ(cold[i].body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(warm[i].body["choices"][0]["token_ids"], cold[i].body["choices"][0]["token_ids"]) << "client " << i;
  }
  EXPECT_EQ(counter(metrics, "ninfer_prefix_cache_hits_total"), 4) << metrics;
  EXPECT_EQ(counter(metrics, "ninfer_prefix_cached_tokens_total"), cached) << metrics;
  EXPECT_GE(counter(metrics, "ninfer_prefix_cache_blocks"), 1) << metrics;
  EXPECT_GE(counter(metrics, "ninfer_prefix_cache_evictable_blocks"), 0) << metrics;
}

// A second request that extends the first (a chat's next turn: its prompt, the reply, more
// tokens) reads the first's tokens from the slot: usage.prompt_tokens_details.cached_tokens and
// /metrics say how many, the request log too, and its greedy ids are those of a server that
// reads every prompt whole (--no-prefix-cache, which reports nothing cached).
TEST(NinferServe, NextTurnReadsOnlyItsNewTokensFromTheSlot) {
  const json ref = reference("tiny-qwen3");
  const json& first_prompt = ref["cases"][2]["prompt_ids"];
  const auto second_turn = [&](httplib::Client& c) {
    json req = ids_request(first_prompt, 6);
    req["ignore_eos"] = true;
    const Reply first = post(c, "/v1/completions", req);
    EXPECT_EQ(first.status, 200) << first.body.dump();
    json next = first_prompt;
    for (const json& id : first.body["choices"][0]["token_ids"]) next.push_back(id);
    for (int64_t id : {7, 8, 9}) next.push_back(id);
    req["prompt"] = next;
    return std::pair{post(c, "/v1/completions", req), next.size()};
  };
  ServerProcess warm(tiny_qwen3_args());
  auto wc = warm.client();
  const auto [reply, prompt_size] = second_turn(*wc);
  ASSERT_EQ(reply.status, 200) << reply.body.dump();
  const int64_t cached = reply.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GE(cached, static_cast<int64_t>(first_prompt.size()) + 5) << "the first prompt and all but its last pick";
  EXPECT_LT(cached, static_cast<int64_t>(prompt_size));
  EXPECT_EQ(reply.body["usage"]["prompt_tokens"], prompt_size);
  const auto metrics = wc->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("ninfer_prefix_cache_hits_total 1\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find(fmt::format("ninfer_prefix_cached_tokens_total {}\n", cached)), std::string::npos);
  EXPECT_EQ(warm.stop(), 0) << warm.log();

  std::vector<std::string> args = tiny_qwen3_args({"--no-prefix-cache"});
  ServerProcess cold(args);
  auto cc = cold.client();
  const auto [cold_reply, cold_size] = second_turn(*cc);
  ASSERT_EQ(cold_reply.status, 200) << cold_reply.body.dump();
  EXPECT_EQ(cold_reply.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(cold_reply.body["choices"][0]["token_ids"], reply.body["choices"][0]["token_ids"]);
  EXPECT_EQ(cold.stop(), 0) << cold.log();
}

// Two conversations on a hybrid model (the demo checkpoint: Gated DeltaNet layers) with the same
// system prompt, shorter than --prefix-state-tokens, and different user messages: the second
// resumes from the state the server kept at the end of the first's system message, so it reads
// at least one full KV block from the cache, and its greedy reply is that of a server that reads
// every prompt whole.
TEST(NinferServe, HybridChatsShareTheirSystemPromptThroughTheCache) {
  std::string system, long_question;
  for (int i = 0; i < 25; ++i) system += "You answer briefly and you never guess. ";
  for (int i = 0; i < 30; ++i) long_question += "What about the river and the hills? ";
  const auto chat = [&](const std::string& question) {
    return json{{"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}}},
                {"max_tokens", 6},
                {"temperature", 0},
                {"ignore_eos", true},
                {"return_token_ids", true},
                {"chat_template_kwargs", {{"enable_thinking", false}}}};
  };
  const auto run = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"--checkpoint", demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN).string(), "--device",
                                  "cpu", "--max-concurrency", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    ServerProcess server(args);
    auto c = server.client();
    const Reply first = post(*c, "/v1/chat/completions", chat(long_question));
    const Reply second = post(*c, "/v1/chat/completions", chat("Why?"));
    EXPECT_EQ(server.stop(), 0) << server.log();
    return std::pair{first, second};
  };
  const auto [warm_first, warm] = run({});
  const auto [cold_first, cold] = run({"--no-prefix-cache"});
  ASSERT_EQ(warm.status, 200) << warm.body.dump();
  ASSERT_EQ(cold.status, 200) << cold.body.dump();
  const int64_t cached = warm.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GE(cached, 64) << "the system prompt's full blocks";
  EXPECT_LT(cached, warm.body["usage"]["prompt_tokens"].get<int64_t>());
  EXPECT_EQ(warm.body["choices"][0]["token_ids"], cold.body["choices"][0]["token_ids"]);
  EXPECT_EQ(warm_first.body["choices"][0]["token_ids"], cold_first.body["choices"][0]["token_ids"]);
}
