// ninfer-serve as an OpenAI client sees it: a real server process on a loopback port, driven
// with cpp-httplib. Token ids are checked against transformers (tests/fixtures/tiny-qwen3);
// chat text against ninfer-run --greedy on the same checkpoint; concurrent results against
// the same requests run alone.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "demo_checkpoint.hpp"
#include "ninfer/checkpoint/safetensors_file.hpp"
#include "process.hpp"
#include "serve_client.hpp"
#include "server_process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer::test;
using nlohmann::json;

namespace {

constexpr double kGreedyMargin = 1e-2; // reference steps at or below this margin may flip

json reference(const std::string& fixture) {
  std::ifstream in(fixtures_dir() / fixture / "reference.json");
  return json::parse(in);
}

size_t trusted_steps(const json& cs) {
  size_t n = 0;
  while (n < cs["greedy_ids"].size() && cs["greedy_top2_margin"][n].get<double>() > kGreedyMargin) ++n;
  return n;
}

std::vector<std::string> fixture_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu",
                             "--max-context", "256", "--max-concurrency", "2", "--prefill-chunk", "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json greedy_ids_request(const json& prompt, int64_t max_tokens) {
  return json{{"model", "tiny-qwen3"}, {"prompt", prompt},         {"max_tokens", max_tokens},
              {"temperature", 0},       {"return_token_ids", true}};
}

const fs::path& demo_checkpoint() { return ninfer::test::demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN); }

} // namespace

TEST(NinferServe, CompletionsWithTokenIdsMatchTransformersGreedy) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  const json ref = reference("tiny-qwen3");
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    const json& cs = ref["cases"][i];
    const Reply r = post(*c, "/v1/completions", greedy_ids_request(cs["prompt_ids"], 24));
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body["object"], "text_completion");
    const json& choice = r.body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "length");
    ASSERT_EQ(choice["token_ids"].size(), 24u);
    const size_t n = trusted_steps(cs);
    EXPECT_GT(n, 0u);
    for (size_t s = 0; s < n; ++s) EXPECT_EQ(choice["token_ids"][s], cs["greedy_ids"][s]) << "case " << i << " step " << s;
    EXPECT_EQ(r.body["usage"]["prompt_tokens"], cs["prompt_ids"].size());
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 24);
    EXPECT_EQ(r.body["usage"]["total_tokens"], cs["prompt_ids"].size() + 24);
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, ConcurrentRequestsEachEqualTheirSoloResult) {
  ServerProcess server(fixture_args());
  const json ref = reference("tiny-qwen3");
  const size_t cases = ref["cases"].size();
  const int64_t lengths[] = {20, 7, 13};
  std::vector<json> solo(cases);
  {
    auto c = server.client();
    for (size_t i = 0; i < cases; ++i)
      solo[i] = post(*c, "/v1/completions", greedy_ids_request(ref["cases"][i]["prompt_ids"], lengths[i])).body;
  }
  // Two rounds of every case at once: more requests than the 2 slots, so some wait and join
  // the batch as others finish.
  std::vector<Reply> replies(2 * cases);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < replies.size(); ++k)
    threads.emplace_back([&, k] {
      auto c = server.client();
      replies[k] = post(*c, "/v1/completions", greedy_ids_request(ref["cases"][k % cases]["prompt_ids"], lengths[k % cases]));
    });
  for (auto& t : threads) t.join();
  for (size_t k = 0; k < replies.size(); ++k) {
    ASSERT_EQ(replies[k].status, 200) << replies[k].body.dump();
    EXPECT_EQ(replies[k].body["choices"][0]["token_ids"], solo[k % cases]["choices"][0]["token_ids"]) << "request " << k;
    const json& cs = ref["cases"][k % cases];
    const size_t n = std::min<size_t>(trusted_steps(cs), lengths[k % cases]);
    for (size_t s = 0; s < n; ++s) EXPECT_EQ(replies[k].body["choices"][0]["token_ids"][s], cs["greedy_ids"][s]);
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, StreamEndsWithFinishReasonUsageAndDone) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  json req = greedy_ids_request(json::array({1, 2, 3}), 6);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  const auto [status, text] = post_stream(*c, "/v1/completions", req);
  ASSERT_EQ(status, 200);
  const std::vector<std::string> events = sse_data(text);
  ASSERT_GE(events.size(), 3u) << text;
  EXPECT_EQ(events.back(), "[DONE]");
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 3);
  const json finish = json::parse(events[events.size() - 3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// --request-log: one JSON line per request with the server's own timings; the token counts
// must match what the client was told, and the times must be consistent with each other.
TEST(NinferServe, RequestLogHasOneLinePerRequestWithServerTimings) {
  const fs::path log = fs::temp_directory_path() / ("ninfer-request-log-" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(log);
  ServerProcess server(fixture_args({"--request-log", log.string()}));
  auto c = server.client();
  const Reply a = post(*c, "/v1/completions", greedy_ids_request(json::array({1, 2, 3, 4, 5, 6, 7}), 9));
  json streamed = greedy_ids_request(json::array({9, 8}), 4);
  streamed["stream"] = true;
  const auto [status, text] = post_stream(*c, "/v1/completions", streamed);
  ASSERT_EQ(a.status, 200);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
  std::ifstream in(log);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  const int64_t prompts[] = {7, 2}, generated[] = {9, 4};
  for (size_t i = 0; i < 2; ++i) {
    const json& l = lines[i];
    EXPECT_EQ(l["finish_reason"], "length");
    EXPECT_TRUE(l["error"].is_null());
    EXPECT_EQ(l["prompt_tokens"], prompts[i]);
    EXPECT_EQ(l["decode_tokens"], generated[i]);
    for (const char* k : {"queue_s", "prefill_s", "ttft_s", "decode_s", "prefill_tok_s", "decode_tok_s"})
      EXPECT_GE(l[k].get<double>(), 0.0) << k;
    // Time to first token = time in the queue + time to read the prompt and sample.
    EXPECT_NEAR(l["ttft_s"].get<double>(), l["queue_s"].get<double>() + l["prefill_s"].get<double>(), 1e-6);
    EXPECT_GT(l["prefill_tok_s"].get<double>(), 0.0);
  }
  fs::remove(log);
}

// GET /metrics speaks Prometheus text and counts what the server did: requests, tokens, slots,
// and the engine loop's rows: 4 decode rows after a 5-token greedy request's first token (its
// prompt chunk's pick), no logits rows for it, and one per token of a request whose top
// logprobs are sampled on the host.
TEST(NinferServe, MetricsCountRequestsTokensAndSlots) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  auto metrics = [&] {
    const auto r = c->Get("/metrics");
    return r && r->status == 200 ? r->body : std::string("(no reply)");
  };
  const std::string before = metrics();
  EXPECT_NE(before.find("# TYPE ninfer_requests_total counter"), std::string::npos) << before;
  EXPECT_NE(before.find("ninfer_slots_total 2\n"), std::string::npos) << before;
  EXPECT_NE(before.find("ninfer_queue_depth 0\n"), std::string::npos) << before;
  EXPECT_EQ(before.find("ninfer_requests_total{"), std::string::npos) << before;
  ASSERT_EQ(post(*c, "/v1/completions", greedy_ids_request(json::array({4, 5, 6}), 5)).status, 200);
  // The scheduler records a request just after its reply is complete: allow it a moment.
  std::string after;
  for (int i = 0; i < 200; ++i) {
    after = metrics();
    if (after.find("ninfer_requests_total{finish_reason=\"length\"} 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(after.find("ninfer_requests_total{finish_reason=\"length\"} 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("ninfer_prompt_tokens_total 3\n"), std::string::npos) << after;
  EXPECT_NE(after.find("ninfer_generation_tokens_total 5\n"), std::string::npos) << after;
  EXPECT_NE(after.find("ninfer_slots_in_use 0\n"), std::string::npos) << after;
  EXPECT_EQ(after.find("ninfer_kv_cache_bytes 0\n"), std::string::npos) << after;
  EXPECT_NE(after.find("ninfer_decode_rows_total 4\n"), std::string::npos) << after;
  EXPECT_NE(after.find("ninfer_logits_rows_total 0\n"), std::string::npos) << after;
  json with_logprobs = greedy_ids_request(json::array({4, 5, 6}), 5);
  with_logprobs["logprobs"] = 2;
  ASSERT_EQ(post(*c, "/v1/completions", with_logprobs).status, 200);
  for (int i = 0; i < 200; ++i) {
    after = metrics();
    if (after.find("ninfer_requests_total{finish_reason=\"length\"} 2\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(after.find("ninfer_logits_rows_total 5\n"), std::string::npos) << after;
  EXPECT_NE(after.find("ninfer_decode_rows_total 8\n"), std::string::npos) << after;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// --pending-timeout-ms: a request that waits longer than that for the one slot gets 503 (the
// demo checkpoint decodes slowly enough on the CPU to keep the slot busy), and the request
// holding the slot is not disturbed.
TEST(NinferServe, RequestWaitingPastThePendingTimeoutGets503) {
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "1",
                        "--pending-timeout-ms", "100"});
  const json busy{{"prompt", json::array({1, 2, 3})}, {"max_tokens", 200}, {"temperature", 0},
                  {"ignore_eos", true}};
  Reply first, second;
  std::thread holder([&] {
    auto c = server.client();
    first = post(*c, "/v1/completions", busy);
  });
  // Until the first request holds the slot (a loaded machine may start its thread late).
  {
    auto c = server.client();
    for (int i = 0; i < 500; ++i) {
      const auto m = c->Get("/metrics");
      if (m && m->body.find("ninfer_slots_in_use 1\n") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  {
    auto c = server.client();
    second = post(*c, "/v1/completions", busy);
  }
  holder.join();
  EXPECT_EQ(second.status, 503) << second.body.dump();
  EXPECT_EQ(second.body["error"]["code"], "queue_timeout") << second.body.dump();
  EXPECT_EQ(first.status, 200) << first.body.dump();
  EXPECT_EQ(first.body["usage"]["completion_tokens"], 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Fields that would change the reply and that ninfer does not do (constrained decoding, suffix,
// best_of, the legacy function fields) or cannot read (a malformed logit bias) are refused by
// name with a 400 in OpenAI's shape, not answered as if absent; their neutral values (a "text"
// response format, an empty bias, echo false, best_of 1) and null are accepted.
TEST(NinferServe, FieldsItCannotHonourAreRefusedByName) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  const auto with = [](const char* key, json value) {
    json r = greedy_ids_request({1, 2}, 3);
    r[key] = std::move(value);
    return r;
  };
  const auto refused = [&](const std::string& route, const json& r, const std::string& param) {
    const Reply got = post(*c, route, r);
    EXPECT_EQ(got.status, 400) << param << ": " << got.body.dump();
    ASSERT_TRUE(got.body.contains("error")) << got.body.dump();
    EXPECT_EQ(got.body["error"]["param"], param) << got.body.dump();
    EXPECT_EQ(got.body["error"]["type"], "invalid_request_error") << got.body.dump();
  };
  refused("/v1/completions", with("response_format", {{"type", "json_object"}}), "response_format");
  refused("/v1/completions", with("response_format", {{"type", "json_schema"}, {"json_schema", json::object()}}),
          "response_format");
  for (const json& bad : {json{{"x", 1}}, json{{"-1", 1}}, json{{"1.5", 1}}, json{{"99999999", 1}},
                         json{{"5", 101}}, json{{"5", "high"}}, json(json::array({5})), json(3)})
    refused("/v1/completions", with("logit_bias", bad), "logit_bias");
  refused("/v1/completions", with("suffix", "tail"), "suffix");
  refused("/v1/completions", with("best_of", 2), "best_of");
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"functions", json::array()}};
  refused("/v1/chat/completions", chat, "functions");
  for (const json& ok : {with("response_format", {{"type", "text"}}), with("logit_bias", json::object()),
                         with("echo", false), with("best_of", 1), with("suffix", nullptr)}) {
    const Reply got = post(*c, "/v1/completions", ok);
    EXPECT_EQ(got.status, 200) << ok.dump() << ": " << got.body.dump();
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// logit_bias: +100 all but forces a token, -100 keeps the greedy pick out; such rows sample on
// the host from their logits (the loop's counter of rows brought back says so).
TEST(NinferServe, LogitBiasMovesThePick) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  const Reply plain = post(*c, "/v1/completions", greedy_ids_request({1, 2, 3}, 4));
  ASSERT_EQ(plain.status, 200) << plain.body.dump();
  const int first = plain.body["choices"][0]["token_ids"][0].get<int>();
  const int forced = first == 7 ? 8 : 7;
  json req = greedy_ids_request({1, 2, 3}, 4);
  req["logit_bias"] = {{std::to_string(forced), 100}};
  const Reply up = post(*c, "/v1/completions", req);
  ASSERT_EQ(up.status, 200) << up.body.dump();
  EXPECT_EQ(up.body["choices"][0]["token_ids"], json::array({forced, forced, forced, forced})) << up.body.dump();
  req["logit_bias"] = {{std::to_string(first), -100}};
  const Reply down = post(*c, "/v1/completions", req);
  ASSERT_EQ(down.status, 200) << down.body.dump();
  EXPECT_NE(down.body["choices"][0]["token_ids"][0].get<int>(), first) << down.body.dump();
  const auto m = c->Get("/metrics");
  ASSERT_TRUE(m);
  const size_t at = m->body.find("\nninfer_logits_rows_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stoll(m->body.substr(at + 26)), 8) << "the biased rows' logits came to the host";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, ErrorsHaveOpenAiShapeAndStatus) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  auto expect_error = [](const Reply& r, int status, const std::string& param, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body.dump();
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << what << ": " << r.body.dump();
    const json& e = r.body["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << what;
    EXPECT_TRUE(e["type"].is_string()) << what;
    EXPECT_TRUE(e.contains("code")) << what;
    if (!param.empty()) EXPECT_EQ(e["param"], param) << what;
  };
  expect_error(post_raw(*c, "/v1/completions", "{\"prompt\": [1, 2"), 400, "", "malformed JSON");
  expect_error(post_raw(*c, "/v1/chat/completions", "not json"), 400, "", "malformed JSON (chat)");
  json r = greedy_ids_request({1, 2}, 4);
  r["temperature"] = "hot";
  expect_error(post(*c, "/v1/completions", r), 400, "temperature", "temperature not a number");
  r = greedy_ids_request({1, 2}, 4);
  r["top_p"] = 1.5;
  expect_error(post(*c, "/v1/completions", r), 400, "top_p", "top_p out of range");
  r = greedy_ids_request({1, 2}, 4);
  r["n"] = 17;
  expect_error(post(*c, "/v1/completions", r), 400, "n", "n=17 (above the 16 choices a request may ask)");
  r = greedy_ids_request({1, 2}, 0);
  expect_error(post(*c, "/v1/completions", r), 400, "max_tokens", "max_tokens 0");
  expect_error(post(*c, "/v1/completions", greedy_ids_request({1, 1000000}, 4)), 400, "prompt", "id outside vocab");
  r = greedy_ids_request({1, 2}, 4);
  r["model"] = "gpt-4";
  expect_error(post(*c, "/v1/completions", r), 404, "model", "unknown model");
  EXPECT_EQ(post(*c, "/v1/completions", r).body["error"]["code"], "model_not_found");
  auto missing = c->Get("/v1/nothing-here");
  ASSERT_TRUE(missing);
  expect_error(Reply{missing->status, json::parse(missing->body, nullptr, false)}, 404, "", "unknown route");
  expect_error(post(*c, "/v1/completions", greedy_ids_request(std::vector<int>(300, 1), 4)), 413, "prompt",
               "prompt longer than the context (256)");
  expect_error(post(*c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}), 400, "",
               "chat on a model without a tokenizer");
  // A max_tokens the context cannot hold next to the prompt is refused up front (400), not cut
  // short where the context fills: 3 + 254 > 256, while 3 + 253 fits exactly.
  const Reply too_long = post(*c, "/v1/completions", greedy_ids_request({1, 2, 3}, 254));
  expect_error(too_long, 400, "max_tokens", "max_tokens beyond the context");
  EXPECT_EQ(too_long.body["error"]["code"], "context_length_exceeded");
  EXPECT_NE(too_long.body["error"]["message"].get<std::string>().find("at most 253"), std::string::npos)
      << too_long.body.dump();
  r = greedy_ids_request({1, 2, 3}, 4);
  r.erase("max_tokens");
  r["max_completion_tokens"] = 300;
  expect_error(post(*c, "/v1/completions", r), 400, "max_completion_tokens", "max_completion_tokens beyond the context");
  r = greedy_ids_request({1, 2, 3}, 253);
  r["ignore_eos"] = true;
  const Reply fits = post(*c, "/v1/completions", r);
  ASSERT_EQ(fits.status, 200) << fits.body.dump();
  EXPECT_EQ(fits.body["usage"]["completion_tokens"], 253);
  // Still serving after all that.
  EXPECT_EQ(post(*c, "/v1/completions", greedy_ids_request({1, 2}, 3)).status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, ApiKeyIsRequiredExceptForHealth) {
  ServerProcess server(fixture_args({"--api-key", "sesame"}));
  auto c = server.client();
  const json req = greedy_ids_request({1, 2}, 2);
  Reply r = post(*c, "/v1/completions", req);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post(*c, "/v1/completions", req, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(post(*c, "/v1/completions", req, {{"Authorization", "Bearer sesame"}}).status, 200);
  auto health = c->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = c->Get("/v1/models", {{"Authorization", "Bearer sesame"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny-qwen3");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, FullQueueIs429AndADisconnectedClientFreesItsSlot) {
  ServerProcess server(
      {"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu", "--max-context", "4096",
       "--max-concurrency", "1", "--max-pending-requests", "0"});
  std::atomic<bool> streaming{false}, hang_up{false};
  std::thread long_stream([&] {
    auto c = server.client();
    json req = greedy_ids_request({1, 2, 3}, 4000);
    req["stream"] = true;
    // With return_token_ids every token is an event; hang up when the test says so.
    post_stream(*c, "/v1/completions", req, [&](const std::string& got) {
      if (got.find("data: ") != std::string::npos) streaming = true;
      return !hang_up;
    });
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto c = server.client();
  // The only slot is busy and the queue holds nothing: a 429 that says when to retry.
  const auto busy = c->Post("/v1/completions", greedy_ids_request({1, 2}, 2).dump(), "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 429) << busy->body;
  EXPECT_EQ(json::parse(busy->body)["error"]["code"], "queue_full");
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  Reply r;
  hang_up = true;
  long_stream.join();
  // Once the server sees the client gone it cancels, and the slot serves the next request.
  for (int i = 0; i < 500 && r.status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = post(*c, "/v1/completions", greedy_ids_request({1, 2}, 2));
  }
  EXPECT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, SigtermLetsTheStreamInFlightFinishAndExitsZero) {
  ServerProcess server(fixture_args());
  std::atomic<bool> started{false};
  std::string received;
  std::thread stream([&] {
    auto c = server.client();
    json req = greedy_ids_request({1, 2, 3}, 200);
    req["stream"] = true;
    req["stream_options"] = {{"include_usage", true}};
    received = post_stream(*c, "/v1/completions", req, [&](const std::string&) {
      started = true;
      return true;
    }).second;
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(server.stop(), 0) << server.log();
  stream.join();
  const std::vector<std::string> events = sse_data(received);
  ASSERT_GE(events.size(), 2u) << received;
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["completion_tokens"], 200);
}

TEST(NinferServe, ChatGreedyEqualsNinferRunAndStreamsTheSameText) {
  const std::string prompt = "Why is the sky blue?";
  const ProcessOutput run = run_process(std::string(NINFER_RUN_BIN) + " --checkpoint " +
                                        shell_quote(demo_checkpoint().string()) + " --chat --greedy --max-new 12 " +
                                        "--device cpu --prompt " + shell_quote(prompt));
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_FALSE(run.out.empty());
  const std::string expected = run.out.substr(0, run.out.size() - 1); // ninfer-run ends with a newline

  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "2"});
  auto c = server.client();
  const json req{{"messages", {{{"role", "user"}, {"content", prompt}}}}, {"max_tokens", 12}, {"temperature", 0}};
  const Reply r = post(*c, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  const std::string content = r.body["choices"][0]["message"]["content"];
  EXPECT_EQ(content, expected);

  json sreq = req;
  sreq["stream"] = true;
  const auto [status, text] = post_stream(*c, "/v1/chat/completions", sreq);
  ASSERT_EQ(status, 200);
  const std::vector<std::string> events = sse_data(text);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(json::parse(events.front())["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    streamed += e["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"],
            r.body["choices"][0]["finish_reason"]);
  EXPECT_EQ(events.back(), "[DONE]");

  // A stop string taken from the middle of the greedy text: the reply is the text before it.
  size_t mid = content.size() / 2;
  while (mid < content.size() && (static_cast<unsigned char>(content[mid]) & 0xC0) == 0x80) ++mid;
  size_t end = mid + 1; // one whole UTF-8 character
  while (end < content.size() && (static_cast<unsigned char>(content[end]) & 0xC0) == 0x80) ++end;
  if (mid < content.size()) {
    const std::string stop = content.substr(mid, end - mid);
    json stop_req = req;
    stop_req["stop"] = json::array({stop});
    const Reply s = post(*c, "/v1/chat/completions", stop_req);
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.body["choices"][0]["message"]["content"], content.substr(0, content.find(stop)));
    EXPECT_EQ(s.body["choices"][0]["finish_reason"], "stop");
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

namespace {

// ninfer-run --json on the demo checkpoint: the reference for chat text and logprobs.
json run_json(const std::string& args) {
  const ProcessOutput run = run_process(std::string(NINFER_RUN_BIN) + " --checkpoint " +
                                        shell_quote(demo_checkpoint().string()) + " --device cpu --json " + args);
  EXPECT_EQ(run.status, 0) << run.err;
  return json::parse(run.out, nullptr, false);
}

// Qwen's split of a reply into reasoning and answer, done on ninfer-run's whole text: the
// reasoning is between <think> and </think> (newlines around it dropped), the answer after.
std::pair<std::string, std::string> split_thinking(const std::string& text) {
  const size_t open = text.find("<think>"), close = text.find("</think>");
  if (open == std::string::npos && close == std::string::npos) return {"", text};
  const size_t from = open == std::string::npos ? 0 : open + 7;
  std::string reasoning = text.substr(from, close == std::string::npos ? std::string::npos : close - from);
  std::string answer = close == std::string::npos ? "" : text.substr(close + 8);
  reasoning.erase(0, std::min(reasoning.size(), reasoning.find_first_not_of('\n')));
  reasoning.erase(reasoning.find_last_not_of('\n') + 1);
  answer.erase(0, std::min(answer.size(), answer.find_first_not_of('\n')));
  return {reasoning, answer};
}

constexpr double kLogprobTolerance = 2e-3; // CPU float32 vs transformers float32, one logit gap
constexpr double kSameCodeTolerance = 1e-5; // the server and ninfer-run share the sampler

} // namespace

// /v1/completions logprobs (legacy shape): the gap between the two best alternatives is the
// logit gap transformers reports, the greedy token is the best one, and a stream carries the
// same numbers token by token.
TEST(NinferServe, CompletionLogprobsMatchTransformersGapsAndStream) {
  ServerProcess server(fixture_args());
  auto c = server.client();
  const json ref = reference("tiny-qwen3");
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    const json& cs = ref["cases"][i];
    json req = greedy_ids_request(cs["prompt_ids"], 12);
    req["logprobs"] = 3;
    const Reply r = post(*c, "/v1/completions", req);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    const json& lp = r.body["choices"][0]["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 12u) << lp.dump();
    ASSERT_EQ(lp["token_logprobs"].size(), 12u);
    ASSERT_EQ(lp["top_logprobs"].size(), 12u);
    ASSERT_EQ(lp["text_offset"].size(), 12u);
    const size_t n = std::min<size_t>(trusted_steps(cs), 12);
    for (size_t s = 0; s < 12; ++s) {
      // No tokenizer: tokens are named by id.
      EXPECT_EQ(lp["tokens"][s], "token_id:" + std::to_string(r.body["choices"][0]["token_ids"][s].get<int>()));
      std::vector<double> alts;
      for (const auto& [tok, v] : lp["top_logprobs"][s].items()) alts.push_back(v.get<double>());
      ASSERT_EQ(alts.size(), 3u) << "greedy: the chosen token is one of the 3 best";
      std::sort(alts.rbegin(), alts.rend());
      EXPECT_DOUBLE_EQ(lp["token_logprobs"][s].get<double>(), alts[0]) << "step " << s;
      EXPECT_LT(alts[0], 0.0);
      double mass = 0;
      for (double a : alts) mass += std::exp(a);
      EXPECT_LE(mass, 1.0 + 1e-6);
      if (s < n)
        EXPECT_NEAR(alts[0] - alts[1], cs["greedy_top2_margin"][s].get<double>(), kLogprobTolerance)
            << "case " << i << " step " << s;
    }
    json sreq = req;
    sreq["stream"] = true;
    const auto [status, text] = post_stream(*c, "/v1/completions", sreq);
    ASSERT_EQ(status, 200);
    std::vector<double> streamed;
    std::vector<int64_t> offsets;
    for (const std::string& e : sse_data(text)) {
      if (e == "[DONE]") continue;
      const json chunk = json::parse(e);
      const json& l = chunk["choices"][0]["logprobs"];
      if (!l.is_object()) continue;
      for (const auto& v : l["token_logprobs"]) streamed.push_back(v.get<double>());
      for (const auto& v : l["text_offset"]) offsets.push_back(v.get<int64_t>());
    }
    ASSERT_EQ(streamed.size(), 12u) << text;
    for (size_t s = 0; s < 12; ++s) {
      EXPECT_DOUBLE_EQ(streamed[s], lp["token_logprobs"][s].get<double>());
      EXPECT_EQ(offsets[s], lp["text_offset"][s].get<int64_t>());
    }
  }
  // Bounds and types are refused clearly.
  json bad = greedy_ids_request({1, 2}, 2);
  bad["logprobs"] = 21;
  Reply e = post(*c, "/v1/completions", bad);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.body["error"]["param"], "logprobs");
  bad["logprobs"] = true;
  EXPECT_EQ(post(*c, "/v1/completions", bad).status, 400);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Chat logprobs (choices[].logprobs.content[]) equal ninfer-run's for the same greedy chat,
// streamed and not; token text and bytes agree; top_logprobs is bounded to 0..20.
// `echo` with `logprobs` and max_tokens 0 scores a text, as lm-evaluation-harness asks: each
// prompt token's log-probability after the ones before is transformers' (teacher-forced float64
// logits of the fixture), the first is null, and the text is the prompt. With max_tokens N the
// completion follows the prompt in tokens, logprobs and text_offset; streamed, the echo is the
// first chunk, whole, and the stream's logprobs and offsets are the reply's.
TEST(NinferServe, EchoScoresThePromptAsTransformersDoes) {
  const json ref = reference("tiny-qwen3");
  const ninfer::SafetensorsFile logits = ninfer::SafetensorsFile::open(fixtures_dir() / "tiny-qwen3" / "reference.safetensors");
  const json& cs = ref["cases"][2];
  const auto& rows = logits.tensor("case2.prompt_logits"); // [prompt, vocab] float32
  const int64_t vocab = rows.shape[1];
  const auto* data = static_cast<const float*>(rows.data);
  const std::vector<int32_t> prompt = cs["prompt_ids"].get<std::vector<int32_t>>();
  ASSERT_GE(prompt.size(), 3u);
  ServerProcess server(fixture_args());
  auto c = server.client();
  json req{{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}};
  const Reply scored = post(*c, "/v1/completions", req);
  ASSERT_EQ(scored.status, 200) << scored.body.dump();
  const json& lp = scored.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), prompt.size()) << lp.dump();
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t j = 1; j < prompt.size(); ++j) {
    const float* row = data + (j - 1) * vocab;
    double mx = row[0], sum = 0;
    for (int64_t v = 0; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
    const double want = row[prompt[j]] - mx - std::log(sum);
    EXPECT_NEAR(lp["token_logprobs"][j].get<double>(), want, kLogprobTolerance) << "prompt token " << j;
    // Two alternatives and the token itself (when it is not among them): 2 or 3 entries.
    EXPECT_GE(lp["top_logprobs"][j].size(), 2u);
    EXPECT_LE(lp["top_logprobs"][j].size(), 3u);
  }
  EXPECT_EQ(scored.body["usage"]["completion_tokens"], 0);
  EXPECT_EQ(scored.body["choices"][0]["finish_reason"], "length");

  req["max_tokens"] = 3;
  req["temperature"] = 0;
  req["return_token_ids"] = true;
  const Reply more = post(*c, "/v1/completions", req);
  ASSERT_EQ(more.status, 200) << more.body.dump();
  const json& m = more.body["choices"][0]["logprobs"];
  ASSERT_EQ(m["token_logprobs"].size(), prompt.size() + 3) << m.dump();
  for (size_t j = 1; j < prompt.size(); ++j)
    EXPECT_NEAR(m["token_logprobs"][j].get<double>(), lp["token_logprobs"][j].get<double>(), kSameCodeTolerance);
  for (size_t s = 0; s < std::min<size_t>(3, trusted_steps(cs)); ++s)
    EXPECT_EQ(more.body["choices"][0]["token_ids"][s], cs["greedy_ids"][s]);
  for (size_t j = 1; j < m["text_offset"].size(); ++j)
    EXPECT_GE(m["text_offset"][j].get<int64_t>(), m["text_offset"][j - 1].get<int64_t>()) << "offsets run on";

  req["stream"] = true;
  const auto [status, text] = post_stream(*c, "/v1/completions", req);
  ASSERT_EQ(status, 200) << text;
  std::vector<json> lps; // token_logprobs entries in stream order
  std::vector<int64_t> offsets;
  size_t first_chunk = 0; // entries of the first chunk with logprobs
  for (const std::string& e : sse_data(text)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& l = chunk["choices"][0]["logprobs"];
    if (!l.is_object()) continue;
    if (lps.empty()) first_chunk = l["token_logprobs"].size();
    for (const auto& v : l["token_logprobs"]) lps.push_back(v);
    for (const auto& v : l["text_offset"]) offsets.push_back(v.get<int64_t>());
  }
  EXPECT_EQ(first_chunk, prompt.size()) << "the echo comes first, whole";
  ASSERT_EQ(lps.size(), prompt.size() + 3) << text;
  ASSERT_EQ(offsets.size(), lps.size()) << text;
  EXPECT_TRUE(lps[0].is_null());
  for (size_t j = 1; j < lps.size(); ++j)
    EXPECT_NEAR(lps[j].get<double>(), m["token_logprobs"][j].get<double>(), kSameCodeTolerance) << "entry " << j;
  for (size_t j = 0; j < offsets.size(); ++j) EXPECT_EQ(offsets[j], m["text_offset"][j].get<int64_t>()) << "entry " << j;
  const Reply zero = post(*c, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 0}});
  EXPECT_EQ(zero.status, 400) << "max_tokens 0 without echo";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A streamed echo without logprobs opens with the prompt's text (the demo model's tokenizer
// decodes it), and the stream's text is the whole reply's: prompt, then completion.
TEST(NinferServe, StreamedEchoOpensWithThePromptText) {
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu"});
  auto c = server.client();
  const std::string prompt = "The state of the union is";
  json req{{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0}, {"echo", true}, {"ignore_eos", true}};
  const Reply whole = post(*c, "/v1/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const std::string want = whole.body["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(want.substr(0, prompt.size()), prompt);
  EXPECT_GT(want.size(), prompt.size()) << "a completion follows the echo";
  req["stream"] = true;
  const auto [status, text] = post_stream(*c, "/v1/completions", req);
  ASSERT_EQ(status, 200) << text;
  std::vector<std::string> pieces;
  for (const std::string& e : sse_data(text)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    if (chunk.contains("choices") && !chunk["choices"].empty() && chunk["choices"][0].contains("text"))
      pieces.push_back(chunk["choices"][0]["text"].get<std::string>());
  }
  ASSERT_FALSE(pieces.empty()) << text;
  EXPECT_EQ(pieces.front(), prompt);
  std::string all;
  for (const std::string& p : pieces) all += p;
  EXPECT_EQ(all, want);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, ChatLogprobsEqualNinferRunAndAreBounded) {
  const std::string prompt = "Name three colours.";
  const json run = run_json("--chat --greedy --max-new 8 --logprobs 4 --prompt " + shell_quote(prompt));
  ASSERT_TRUE(run.is_object());
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "2"});
  auto c = server.client();
  json req{{"messages", {{{"role", "user"}, {"content", prompt}}}}, {"max_tokens", 8}, {"temperature", 0},
           {"logprobs", true}, {"top_logprobs", 4}, {"return_token_ids", true}};
  const Reply r = post(*c, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const json& choice = r.body["choices"][0];
  EXPECT_EQ(choice["token_ids"], run["generated_ids"]);
  const json& content = choice["logprobs"]["content"];
  ASSERT_EQ(content.size(), run["generated_ids"].size());
  for (size_t s = 0; s < content.size(); ++s) {
    EXPECT_NEAR(content[s]["logprob"].get<double>(), run["generated_logprobs"][s].get<double>(), kSameCodeTolerance);
    const json& top = content[s]["top_logprobs"];
    ASSERT_EQ(top.size(), 4u);
    for (size_t k = 0; k < 4; ++k)
      EXPECT_NEAR(top[k]["logprob"].get<double>(), run["generated_top_logprobs"][s][k][1].get<double>(),
                  kSameCodeTolerance);
    // bytes are the token's text, byte for byte (whole characters here: ASCII or not cut).
    std::string from_bytes;
    for (const auto& b : content[s]["bytes"]) from_bytes.push_back(static_cast<char>(b.get<int>()));
    if (from_bytes.find('\xEF') == std::string::npos) EXPECT_EQ(content[s]["token"], from_bytes);
  }
  json sreq = req;
  sreq["stream"] = true;
  const auto [status, text] = post_stream(*c, "/v1/chat/completions", sreq);
  ASSERT_EQ(status, 200);
  json streamed = json::array();
  for (const std::string& e : sse_data(text)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    if (chunk["choices"].empty() || !chunk["choices"][0]["logprobs"].is_object()) continue;
    for (const auto& x : chunk["choices"][0]["logprobs"]["content"]) streamed.push_back(x);
  }
  EXPECT_EQ(streamed, content);
  for (int top : {-1, 21}) {
    json bad = req;
    bad["top_logprobs"] = top;
    const Reply b = post(*c, "/v1/chat/completions", bad);
    EXPECT_EQ(b.status, 400) << top;
    EXPECT_EQ(b.body["error"]["param"], "top_logprobs");
  }
  json no_lp = req;
  no_lp["logprobs"] = false;
  EXPECT_EQ(post(*c, "/v1/chat/completions", no_lp).status, 400) << "top_logprobs without logprobs";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// chat_template_kwargs.enable_thinking: on by default (the prompt has no empty think block)
// with reasoning_content split off; off adds the empty block (4 more prompt tokens: <think>,
// "\n\n", </think>, "\n\n") and returns plain content. Both equal ninfer-run's chat.
TEST(NinferServe, ThinkingSwitchIsHonouredAndReasoningIsSplitOff) {
  const std::string prompt = "Why is the sky blue?";
  const json think = run_json("--chat --greedy --max-new 16 --prompt " + shell_quote(prompt));
  const json no_think = run_json("--chat --greedy --no-think --max-new 16 --prompt " + shell_quote(prompt));
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "2"});
  auto c = server.client();
  const json req{{"messages", {{{"role", "user"}, {"content", prompt}}}}, {"max_tokens", 16}, {"temperature", 0}};
  const Reply on = post(*c, "/v1/chat/completions", req);
  json off_req = req;
  off_req["chat_template_kwargs"] = {{"enable_thinking", false}};
  const Reply off = post(*c, "/v1/chat/completions", off_req);
  json on_req = req;
  on_req["chat_template_kwargs"] = {{"enable_thinking", true}};
  const Reply on2 = post(*c, "/v1/chat/completions", on_req);
  ASSERT_EQ(on.status, 200) << on.body.dump();
  ASSERT_EQ(off.status, 200) << off.body.dump();
  EXPECT_EQ(on2.body["choices"][0]["message"], on.body["choices"][0]["message"]);
  EXPECT_EQ(off.body["usage"]["prompt_tokens"].get<int>(), on.body["usage"]["prompt_tokens"].get<int>() + 4);
  EXPECT_EQ(think["prompt_ids"].size(), on.body["usage"]["prompt_tokens"].get<size_t>());
  EXPECT_EQ(no_think["prompt_ids"].size(), off.body["usage"]["prompt_tokens"].get<size_t>());

  const json& m_off = off.body["choices"][0]["message"];
  EXPECT_EQ(m_off["content"], no_think["text"]);
  EXPECT_FALSE(m_off.contains("reasoning_content")) << "thinking off: no split";
  const json& m_on = on.body["choices"][0]["message"];
  const auto [reasoning, answer] = split_thinking(think["text"].get<std::string>());
  EXPECT_EQ(m_on["content"], answer) << think["text"];
  ASSERT_TRUE(m_on.contains("reasoning_content"));
  if (reasoning.empty()) EXPECT_TRUE(m_on["reasoning_content"].is_null());
  else EXPECT_EQ(m_on["reasoning_content"], reasoning);

  // Streamed: reasoning_content deltas then content deltas, joining to the same two parts.
  json sreq = req;
  sreq["stream"] = true;
  const auto [status, text] = post_stream(*c, "/v1/chat/completions", sreq);
  ASSERT_EQ(status, 200);
  std::string r_stream, c_stream;
  bool content_started = false;
  for (const std::string& e : sse_data(text)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    if (chunk["choices"].empty()) continue;
    const json d = chunk["choices"][0]["delta"];
    if (d.contains("reasoning_content")) {
      EXPECT_FALSE(content_started) << "reasoning after content";
      r_stream += d["reasoning_content"].get<std::string>();
    }
    if (d.contains("content") && !d["content"].get<std::string>().empty()) content_started = true;
    c_stream += d.value("content", "");
  }
  EXPECT_EQ(r_stream, reasoning);
  EXPECT_EQ(c_stream, answer);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

namespace {

// Connects to 127.0.0.1:port, sends `request` whole, and closes without reading.
void send_and_close(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the request is taken into the slot
  ::close(fd);
}

std::vector<json> read_log(const fs::path& log) {
  std::ifstream in(log);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

} // namespace

// A non-streamed request whose client hangs up is cancelled: its slot serves the next request
// long before the abandoned one (30000 tokens) could have finished.
TEST(NinferServe, NonStreamedRequestOfAClientThatHangsUpIsCancelled) {
  const fs::path log = fs::temp_directory_path() / ("ninfer-hangup-log-" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(log);
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "1",
                        "--max-pending-requests", "0", "--request-log", log.string()});
  const std::string body = json{{"prompt", json::array({1, 2, 3})}, {"max_tokens", 30000}, {"temperature", 0},
                                {"ignore_eos", true}}.dump();
  send_and_close(server.port(), "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  auto c = server.client();
  Reply r;
  const auto t0 = std::chrono::steady_clock::now();
  do {
    json next = greedy_ids_request({1, 2}, 2);
    next.erase("model");
    r = post(*c, "/v1/completions", next);
    if (r.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  EXPECT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(server.stop(), 0) << server.log();
  const std::vector<json> lines = read_log(log);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["finish_reason"], "cancelled");
  EXPECT_LT(lines[0]["decode_tokens"].get<int>(), 30000);
  EXPECT_EQ(lines[1]["finish_reason"], "length");
  fs::remove(log);
}

// Chunked prefill shares the steps with decoding: while a long prompt (many --prefill-chunk
// chunks) is read, a stream that is already decoding keeps receiving tokens. The prefill
// window is the server's own (request log: admitted_at .. first_token_at of the long request);
// the stream's tokens are timed as they arrive at the client, on the same machine's clock.
TEST(NinferServe, DecodingStreamKeepsGettingTokensDuringAnotherRequestsLongPrefill) {
  const fs::path log = fs::temp_directory_path() / ("ninfer-prefill-log-" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(log);
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "2",
                        "--prefill-chunk", "16", "--request-log", log.string()});
  const auto wall = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  std::mutex mu;
  std::vector<double> arrivals; // wall time of each streamed token event
  std::atomic<bool> hang_up{false};
  std::thread stream([&] {
    auto c = server.client();
    json req{{"prompt", json::array({1, 2, 3})}, {"max_tokens", 20000}, {"temperature", 0}, {"ignore_eos", true},
             {"stream", true}, {"return_token_ids", true}};
    size_t seen = 0;
    post_stream(*c, "/v1/completions", req, [&](const std::string& got) {
      const double now = wall();
      size_t events = 0;
      for (size_t p = got.find("\"token_ids\""); p != std::string::npos; p = got.find("\"token_ids\"", p + 1)) ++events;
      std::lock_guard lock(mu);
      for (; seen < events; ++seen) arrivals.push_back(now);
      return !hang_up;
    });
  });
  const auto count = [&] {
    std::lock_guard lock(mu);
    return arrivals.size();
  };
  while (count() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // 800 prompt tokens: 50 chunks of 16.
  std::vector<int> long_prompt(800);
  for (size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = static_cast<int>(1 + (i * 7919) % 5000);
  Reply r;
  {
    auto c = server.client();
    json req = greedy_ids_request(long_prompt, 1);
    req.erase("model");
    r = post(*c, "/v1/completions", req);
  }
  hang_up = true;
  stream.join();
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(server.stop(), 0) << server.log();
  const std::vector<json> lines = read_log(log);
  const json* long_req = nullptr;
  for (const json& l : lines)
    if (l["prompt_tokens"] == 800) long_req = &l;
  ASSERT_NE(long_req, nullptr);
  const double from = (*long_req)["admitted_at"].get<double>(), to = (*long_req)["first_token_at"].get<double>();
  size_t during = 0;
  for (double t : arrivals) during += t > from && t < to;
  // One decode step per prefill chunk: about 50 tokens; a prefill that blocked decoding
  // would let none through.
  EXPECT_GE(during, 10u) << "prefill took " << (to - from) << " s; stream tokens " << arrivals.size();
  fs::remove(log);
}

// tools/ninfer-soak/ninfer_soak.py against the real server, briefly and small: a soak with
// two clients in conversations of two turns (no failures, tokens counted as the server counted
// them, second turns read from the cache) and the inter-token latency benchmark (the stream
// keeps decoding during the long prefill, read in mixed steps).
TEST(NinferServe, SoakToolRunsAgainstTheServer) {
  if (run_process("python3 --version").status != 0) GTEST_SKIP() << "no python3";
  ServerProcess server({"--checkpoint", demo_checkpoint().string(), "--device", "cpu", "--max-concurrency", "2",
                        "--prefill-chunk", "16"});
  const std::string tool = shell_quote((source_dir() / "tools/ninfer-soak/ninfer_soak.py").string());
  const std::string url = " --url http://127.0.0.1:" + std::to_string(server.port());
  const ProcessOutput soak = run_process("python3 " + tool + url +
                                         " --json --clients 2 --duration 3 --prompt-lengths 8,100 --max-tokens 6 --turns 2 --turn-tokens 10");
  ASSERT_EQ(soak.status, 0) << soak.out << soak.err;
  const json s = json::parse(soak.out);
  EXPECT_GE(s["requests"].get<int>(), 2);
  EXPECT_EQ(s["failures"], 0);
  EXPECT_EQ(s["generated_tokens"], 6 * s["requests"].get<int>());
  EXPECT_GT(s["tok_s"].get<double>(), 0.0);
  EXPECT_GT(s["ttft_s"]["p99"].get<double>(), 0.0);
  EXPECT_GE(s["ttft_s"]["p99"].get<double>(), s["ttft_s"]["p50"].get<double>());
  // Each second turn extends its client's first (prompt and reply), which the server still holds
  // unless the other client's new request took that slot meanwhile (a prefix this short fills no
  // whole block for the prefix cache): most second turns read part of their prompt.
  const json& c = s["conversations"];
  ASSERT_GE(c["later_turns"].get<int>(), 1) << c.dump();
  EXPECT_GE(2 * c["later_with_cache_hit"].get<int>(), c["later_turns"].get<int>()) << c.dump();
  EXPECT_GT(c["later_cached_tokens"].get<int>(), 0) << c.dump();
  EXPECT_LT(c["later_cached_tokens"].get<int>(), c["later_prompt_tokens"].get<int>()) << c.dump();
  const bool smi = run_process("command -v nvidia-smi").status == 0;
  EXPECT_EQ(s["gpu_memory_start"]["source"], smi ? "nvidia-smi" : "metrics");
  EXPECT_EQ(s["gpu_memory_end"]["source"], smi ? "nvidia-smi" : "metrics");
  // The server counted the same tokens (it records a request just after its reply).
  const std::string want = "ninfer_generation_tokens_total " + std::to_string(s["generated_tokens"].get<int>()) + "\n";
  std::string metrics;
  for (int i = 0; i < 200 && metrics.find(want) == std::string::npos; ++i) {
    const auto m = server.client()->Get("/metrics");
    metrics = m ? m->body : "";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(metrics.find(want), std::string::npos) << metrics;

  const ProcessOutput itl = run_process("python3 " + tool + url + " --json --mode itl --long-prompt 480 --stream-tokens 60");
  ASSERT_EQ(itl.status, 0) << itl.out << itl.err;
  const json b = json::parse(itl.out);
  EXPECT_EQ(b["failures"], 0);
  EXPECT_EQ(b["alone"]["tokens"], 60);
  EXPECT_EQ(b["with_prefill"]["tokens"], 60);
  EXPECT_GT(b["stream_tokens_during_prefill"].get<int>(), 0);
  ASSERT_EQ(b["per_stream"].size(), 1u);
  EXPECT_GT(b["itl_ratio_p50"].get<double>(), 0.0) << "the stream's ITL during the prefill over alone";
  // The long prompt was read beside the stream, in mixed steps.
  const auto m = server.client()->Get("/metrics");
  ASSERT_TRUE(m);
  const size_t at = m->body.find("\nninfer_mixed_steps_total ");
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GT(std::stoll(m->body.substr(at + 26)), 0) << m->body.substr(at, 40);

  // decode: two clients together; each round's window holds tokens of both.
  const ProcessOutput dec = run_process("python3 " + tool + url +
                                        " --json --mode decode --clients 2 --prompt-length 8 --max-tokens 24 --rounds 2");
  ASSERT_EQ(dec.status, 0) << dec.out << dec.err;
  const json d = json::parse(dec.out);
  EXPECT_EQ(d["failures"], 0);
  ASSERT_EQ(d["rounds"].size(), 2u);
  for (const json& r : d["rounds"]) {
    EXPECT_GT(r["window_tokens"].get<int>(), 2) << r.dump();
    EXPECT_GT(r["decode_tok_s"].get<double>(), 0.0) << r.dump();
    EXPECT_EQ(r["client_itl_p50_s"].size(), 2u);
  }
  EXPECT_EQ(d["mean_context"], 8 + 12);
  EXPECT_EQ(server.stop(), 0) << server.log();
}
