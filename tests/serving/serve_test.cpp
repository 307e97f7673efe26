// ninfer-serve as an OpenAI client sees it: a real server process on a loopback port, driven
// with cpp-httplib. Token ids are checked against transformers (tests/fixtures/tiny-qwen3);
// chat text against ninfer-run --greedy on the same checkpoint; concurrent results against
// the same requests run alone. (The official `openai` npm client comes in a later slice.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "demo_checkpoint.hpp"
#include "process.hpp"
#include "server_process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer::test;
using nlohmann::json;

namespace {

constexpr double kGreedyMargin = 1e-2; // reference steps at or below this margin may flip

struct Reply {
  int status = 0;
  json body;
};

Reply post(httplib::Client& c, const std::string& path, const json& body, httplib::Headers headers = {}) {
  auto r = c.Post(path.c_str(), headers, body.dump(), "application/json");
  if (!r) return {-1, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

Reply post_raw(httplib::Client& c, const std::string& path, const std::string& body) {
  auto r = c.Post(path.c_str(), body, "application/json");
  if (!r) return {-1, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

// The `data:` payloads of a server-sent-events stream, in order.
std::vector<std::string> sse_data(const std::string& stream) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t end = stream.find("\n\n", pos);
    const std::string event = stream.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

// POSTs with "stream": true; `on_data` sees each received piece and may return false to
// hang up. Returns the status and everything received.
std::pair<int, std::string> post_stream(httplib::Client& c, const std::string& path, const json& body,
                                        const std::function<bool(const std::string&)>& on_data = {}) {
  std::string received;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    return on_data ? on_data(received) : true;
  };
  auto r = c.send(req);
  return {r ? r->status : -1, received};
}

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

// GET /metrics speaks Prometheus text and counts what the server did.
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
  std::this_thread::sleep_for(std::chrono::milliseconds(150)); // the first request holds the slot
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
  r["n"] = 2;
  expect_error(post(*c, "/v1/completions", r), 400, "n", "n=2");
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
  // The only slot is busy and the queue holds nothing.
  Reply r = post(*c, "/v1/completions", greedy_ids_request({1, 2}, 2));
  EXPECT_EQ(r.status, 429) << r.body.dump();
  EXPECT_EQ(r.body["error"]["code"], "queue_full");
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
