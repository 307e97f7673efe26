// ninfer-serve against hostile and careless clients, on loopback with raw sockets: slow,
// idle, oversized, pipelined and disconnecting connections, and malformed fields. Each test
// states what a client must still get (an answer, a status naming the field, a free slot)
// and within how long.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "demo_checkpoint.hpp"
#include "process.hpp"
#include "raw_http.hpp"
#include "server_process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

json completion(const json& prompt, int64_t max_tokens, bool stream = false) {
  return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
              {"stream", stream}};
}

std::vector<std::string> tiny_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu",
                             "--max-context", "256", "--max-concurrency", "2", "--prefill-chunk", "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

const fs::path& demo() { return demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN); }

std::vector<std::string> demo_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"--checkpoint", demo().string(), "--device", "cpu"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A gauge's value from /metrics, or -1.
double gauge(int port, const std::string& name) {
  const auto r = ask(port, get_text("/metrics"));
  if (!r) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r->body.substr(at + name.size() + 2));
}

std::vector<json> read_log(const fs::path& log) {
  std::ifstream in(log);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) lines.push_back(std::move(j)); // a line being written
  }
  return lines;
}

int64_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

fs::path temp_log(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ninfer-" + name + "-" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(p);
  return p;
}

} // namespace

// Slow clients cost a socket, not a worker: sixteen clients sending a request head one byte
// a second (more than the slots and the queue together) leave /health and generation
// requests answered promptly.
TEST(NinferServeHostile, SlowClientsDoNotLockOutHealthOrValidClients) {
  ServerProcess server(tiny_args({"--max-pending-requests", "4"}));
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 16; ++i) slow.push_back(std::make_unique<Conn>(server.port()));
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (size_t k = 0; k < head.size() && !done; ++k) {
      for (auto& c : slow) c->send(head.substr(k, 1));
      for (int t = 0; t < 10 && !done; ++t) std::this_thread::sleep_for(milliseconds(100));
    }
  });
  std::this_thread::sleep_for(milliseconds(1500)); // every slow client has begun its head
  auto t0 = Clock::now();
  const auto health = ask(server.port(), get_text("/health"), milliseconds(3000));
  const double health_s = seconds_since(t0);
  t0 = Clock::now();
  const auto gen = ask(server.port(), post_text("/v1/completions", completion({1, 2, 3}, 4).dump()), milliseconds(5000));
  const double gen_s = seconds_since(t0);
  done = true;
  trickle.join();
  ASSERT_TRUE(health) << "no /health answer within 3 s while 16 clients trickle";
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(health_s, 1.0);
  ASSERT_TRUE(gen) << "no completion within 5 s while 16 clients trickle";
  EXPECT_EQ(gen->status, 200) << gen->body;
  EXPECT_LT(gen_s, 3.0);
  slow.clear();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A request head and a request body each have a deadline: a client that trickles either gets
// 408 and is disconnected soon after the deadline, whatever its pace.
TEST(NinferServeHostile, SlowHeadAndSlowBodyGet408AtTheirDeadlines) {
  ServerProcess server(tiny_args({"--request-head-timeout-ms", "1000", "--request-body-timeout-ms", "1500"}));
  const auto trickle_until_closed = [](Conn& c, const std::string& prefix, const std::string& drip,
                                       double limit_s) -> double {
    const auto t0 = Clock::now();
    c.send(prefix);
    for (size_t k = 0; seconds_since(t0) < limit_s; ++k) {
      if (!c.send(drip.substr(k % drip.size(), 1))) break;
      if (!c.pump(milliseconds(200))) break;
    }
    c.closed_within(milliseconds(200));
    return seconds_since(t0);
  };
  {
    Conn c(server.port());
    const double s = trickle_until_closed(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", "abcdefgh", 6);
    EXPECT_GE(s, 0.9);
    EXPECT_LT(s, 3.0) << "the head deadline (1 s) did not end a trickling head";
    const auto r = c.response(milliseconds(100));
    ASSERT_TRUE(r) << c.received();
    EXPECT_EQ(r->status, 408);
  }
  {
    Conn c(server.port());
    const double s = trickle_until_closed(
        c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        "          ", 6);
    EXPECT_GE(s, 1.4);
    EXPECT_LT(s, 3.5) << "the body deadline (1.5 s) did not end a trickling body";
    const auto r = c.response(milliseconds(100));
    ASSERT_TRUE(r) << c.received();
    EXPECT_EQ(r->status, 408);
  }
  // An idle connection is closed at the head deadline too (quietly: it sent nothing).
  {
    Conn c(server.port());
    const auto t0 = Clock::now();
    EXPECT_TRUE(c.closed_within(milliseconds(3000)));
    EXPECT_GE(seconds_since(t0), 0.9);
  }
  EXPECT_EQ(ask(server.port(), get_text("/health"))->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Connections are budgeted apart from the slots: a total and a per-peer limit. A peer at its
// limit is refused (503, closed) while another peer is served; a refused peer is served again
// once its connections close.
TEST(NinferServeHostile, ConnectionBudgetHasATotalAndAPerPeerLimit) {
  ServerProcess server({"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu", "--max-concurrency",
                        "1", "--max-connections", "6", "--max-connections-per-peer", "3"});
  std::vector<std::unique_ptr<Conn>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<Conn>(server.port(), "127.0.0.1"));
  std::this_thread::sleep_for(milliseconds(200));
  {
    Conn over(server.port(), "127.0.0.1");
    over.send(get_text("/health"));
    const auto r = over.response(milliseconds(2000));
    ASSERT_TRUE(r) << "a fourth connection from one peer was neither answered nor refused";
    EXPECT_EQ(r->status, 503);
    EXPECT_NE(r->body.find("--max-connections-per-peer"), std::string::npos) << r->body;
    EXPECT_TRUE(over.closed_within(milliseconds(1000)));
  }
  // Another peer is still served (4 connections of 6; this one stays open).
  idle.push_back(std::make_unique<Conn>(server.port(), "127.0.0.2"));
  idle.back()->send(get_text("/health"));
  const auto other = idle.back()->response(milliseconds(2000));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  for (int i = 0; i < 2; ++i) idle.push_back(std::make_unique<Conn>(server.port(), "127.0.0.3"));
  std::this_thread::sleep_for(milliseconds(200));
  {
    const auto r = ask(server.port(), get_text("/health"), milliseconds(2000), "127.0.0.4");
    ASSERT_TRUE(r) << "a connection past the total was neither answered nor refused";
    EXPECT_EQ(r->status, 503);
    EXPECT_NE(r->body.find("--max-connections"), std::string::npos) << r->body;
  }
  idle.clear();
  std::optional<RawResponse> back;
  const auto t0 = Clock::now();
  while (seconds_since(t0) < 3 && !(back && back->status == 200))
    back = ask(server.port(), get_text("/health"), milliseconds(1000), "127.0.0.1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// --max-body-bytes: a larger body is 413 (declared or chunked), one within it is served (also
// when the client waits for 100 Continue); --max-headers and --max-header-bytes: 431.
TEST(NinferServeHostile, OversizedBodiesAre413AndTooManyHeaders431) {
  ServerProcess server(tiny_args({"--max-body-bytes", "1000", "--max-headers", "20"}));
  const auto body_of = [](size_t ids) {
    json p = json::array();
    for (size_t i = 0; i < ids; ++i) p.push_back(1);
    return completion(p, 2).dump();
  };
  const std::string small = body_of(100), big = body_of(600);
  ASSERT_LT(small.size(), 1000u);
  ASSERT_GT(big.size(), 1000u);
  auto r = ask(server.port(), post_text("/v1/completions", small));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = ask(server.port(), post_text("/v1/completions", big));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_NE(r->body.find("--max-body-bytes"), std::string::npos) << r->body;
  // Declared far beyond the limit: refused without waiting for the body.
  r = ask(server.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{",
          milliseconds(2000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  // Chunked: no length up front, cut off when the limit is passed.
  std::string chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 10; ++i) chunked += "c8\r\n" + std::string(200, ' ') + "\r\n";
  chunked += "0\r\n\r\n";
  r = ask(server.port(), chunked);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 30; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  r = ask(server.port(), many + "\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  r = ask(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40000, 'a') + "\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  // curl's way with large bodies: the head first, with Expect: 100-continue.
  {
    Conn c(server.port());
    const std::string text = post_text("/v1/completions", small, "Expect: 100-continue\r\n");
    const size_t body_at = text.find("\r\n\r\n") + 4;
    c.send(text.substr(0, body_at));
    const auto t0 = Clock::now();
    while (c.received().find("\r\n\r\n") == std::string::npos && seconds_since(t0) < 5) c.pump(milliseconds(50));
    EXPECT_EQ(c.received().rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << c.received();
    c.send(text.substr(body_at));
    const auto r2 = c.response(milliseconds(5000));
    ASSERT_TRUE(r2);
    EXPECT_EQ(r2->status, 100); // the interim response, then the answer
    const auto r3 = c.response(milliseconds(5000));
    ASSERT_TRUE(r3);
    EXPECT_EQ(r3->status, 200) << r3->body;
  }
  EXPECT_EQ(ask(server.port(), get_text("/health"))->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Mistakes in a request are 400 naming the field, never 500.
TEST(NinferServeHostile, ClientMistakesAre400NamingTheField) {
  ServerProcess server(demo_args());
  const auto expect_400 = [&](const std::string& body, const std::string& param) {
    const bool chat = body.find("\"messages\"") != std::string::npos;
    const auto r = ask(server.port(), post_text(chat ? "/v1/chat/completions" : "/v1/completions", body));
    ASSERT_TRUE(r) << body;
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body;
    EXPECT_EQ(e["error"]["param"], param) << body << " -> " << r->body;
  };
  expect_400(R"({"prompt": [1, 2], "max_tokens": 2, "temperature": 1e999})", "temperature");
  expect_400(R"({"prompt": [1, 2], "max_tokens": 2, "stream_options": {"include_usage": -1e999}})",
             "stream_options.include_usage");
  expect_400(R"({"prompt": [1, 1e999], "max_tokens": 2})", "prompt[1]");
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": 5, "text": "hi"}]}], "max_tokens": 2})",
             "messages[0].content");
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": null, "text": "hi"}]}], "max_tokens": 2})",
             "messages[0].content");
  expect_400(R"({"prompt": [1, 2], "max_tokens": 2, "repetition_penalty": 1e-300})", "repetition_penalty");
  expect_400(R"({"prompt": [1, 2], "max_tokens": 2, "top_p": 0})", "top_p");
  expect_400(R"({"prompt": [1, 2], "max_tokens": 2, "seed": 18446744073709551615})", "seed");
  expect_400(R"({"prompt": [1, 2], "max_tokens": 2, "stream": true, "stream_options": {"include_usage": "yes"}})",
             "stream_options.include_usage");
  expect_400(R"({"messages": [{"role": "user", "content": []}], "max_tokens": 2})", "messages[0].content");
  expect_400(R"({"messages": [{"role": "user", "content": null}], "max_tokens": 2})", "messages[0].content");
  expect_400(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "18 C"}], "max_tokens": 2})",
             "messages[1].tool_call_id");
  expect_400(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": [{"type": "function",
               "function": {"name": "f", "strict": true}}]})",
             "tools[0].function.strict");
  // A limit past the context: the sum in the message is exact, not wrapped around.
  const auto huge = ask(server.port(), post_text("/v1/completions", R"({"prompt": [1, 2], "max_tokens": 9223372036854775807})"));
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400);
  EXPECT_NE(huge->body.find("asks for 9223372036854775809 (2 in the prompt"), std::string::npos) << huge->body;
  // Anthropic: a message without content blocks is the client's mistake, in Anthropic's shape.
  for (const char* path : {"/v1/messages", "/v1/messages/count_tokens"}) {
    const auto r = ask(server.port(), post_text(path, R"({"max_tokens": 2, "messages": [{"role": "user", "content": []}]})"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << path << " -> " << r->body;
    const json e = json::parse(r->body, nullptr, false);
    EXPECT_EQ(e.value("type", ""), "error") << r->body;
    EXPECT_EQ(e["error"].value("type", ""), "invalid_request_error") << r->body;
    EXPECT_NE(e["error"].value("message", "").find("messages[0].content"), std::string::npos) << r->body;
  }
  const auto ok = ask(server.port(), post_text("/v1/completions", R"({"prompt": [1, 2], "max_tokens": 2, "repetition_penalty": 1.1})"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A temperature too small to divide by (1 / T is infinite below about 5e-309) samples as the
// limit T -> 0 does: greedily, on the device's sample op and on the host's sampler
// (a repetition penalty), giving temperature 0's tokens; the server stays up.
TEST(NinferServeHostile, ATemperatureTooSmallToDivideByIsGreedy) {
  ServerProcess server(demo_args());
  const auto text = [&](json body) -> std::string {
    body["prompt"] = {1, 2, 3};
    body["max_tokens"] = 6;
    body["ignore_eos"] = true;
    body["seed"] = 7;
    const auto r = ask(server.port(), post_text("/v1/completions", body.dump()), milliseconds(30000));
    if (!r || r->status != 200) return "(failed: " + (r ? r->body : std::string("no answer")) + ")";
    return json::parse(r->body)["choices"][0]["text"];
  };
  for (const json extra : {json::object(), json{{"repetition_penalty", 1.1}}}) {
    json greedy = extra;
    greedy["temperature"] = 0;
    const std::string expected = text(greedy);
    ASSERT_EQ(expected.find("(failed"), std::string::npos) << expected;
    for (const double t : {5e-324, 1e-310, 1e-6}) {
      json tiny = extra;
      tiny["temperature"] = t;
      EXPECT_EQ(text(tiny), expected) << tiny.dump();
    }
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// More choices than the slots and the queue hold together can never be served: a 400 naming
// `n`, not a 429 to retry. As many as they hold are served.
TEST(NinferServeHostile, ChoicesBeyondTheSlotsAndTheQueueAre400) {
  ServerProcess server(tiny_args({"--max-pending-requests", "0"}));
  json body = completion({1, 2}, 2);
  body["n"] = 3;
  const auto r = ask(server.port(), post_text("/v1/completions", body.dump()));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "n") << r->body;
  body["n"] = 2;
  const auto ok = ask(server.port(), post_text("/v1/completions", body.dump()));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["choices"].size(), 2u);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// ninfer-run takes the same sampling parameters: a clear error naming the flag's field.
TEST(NinferServeHostile, NinferRunRejectsATinyRepetitionPenalty) {
  const ProcessOutput r = run_process(std::string(NINFER_RUN_BIN) + " --checkpoint " + shell_quote(demo().string()) +
                                      " --device cpu --prompt hi --max-new 2 --repetition-penalty 1e-300");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("repetition_penalty"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

// Requests pipelined on one connection are each answered, in order.
TEST(NinferServeHostile, PipelinedRequestsAreEachAnsweredInOrder) {
  ServerProcess server(tiny_args());
  Conn c(server.port());
  ASSERT_TRUE(c.send(post_text("/v1/completions", completion({1, 2, 3}, 3).dump()) + get_text("/health") +
                     post_text("/v1/completions", completion({4, 5}, 2).dump()) + get_text("/v1/models")));
  std::vector<RawResponse> got;
  for (int i = 0; i < 4; ++i) {
    auto r = c.response(milliseconds(5000));
    ASSERT_TRUE(r) << "response " << i << " of 4 missing; received so far: " << c.received();
    got.push_back(std::move(*r));
  }
  EXPECT_EQ(got[0].status, 200);
  EXPECT_EQ(json::parse(got[0].body)["usage"]["completion_tokens"], 3);
  EXPECT_EQ(got[1].status, 200);
  EXPECT_EQ(json::parse(got[1].body)["status"], "ok");
  EXPECT_EQ(got[2].status, 200);
  EXPECT_EQ(json::parse(got[2].body)["usage"]["completion_tokens"], 2);
  EXPECT_EQ(got[3].status, 200);
  EXPECT_EQ(json::parse(got[3].body)["object"], "list");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A streamed request whose client leaves while it waits for a slot gives its queue place back
// at once (not when a token would have been written), so the next request is queued, not 429.
TEST(NinferServeHostile, QueuedStreamThatDisconnectsFreesItsQueuePlaceAtOnce) {
  ServerProcess server(demo_args({"--max-concurrency", "1", "--max-pending-requests", "1"}));
  Conn holder(server.port());
  holder.send(post_text("/v1/completions", completion({1, 2, 3}, 20000, true).dump()));
  const auto t0 = Clock::now();
  while (holder.received().find("data: ") == std::string::npos && seconds_since(t0) < 10) holder.pump(milliseconds(50));
  ASSERT_NE(holder.received().find("data: "), std::string::npos) << "the slot holder does not stream";
  {
    Conn queued(server.port());
    queued.send(post_text("/v1/completions", completion({4, 5, 6}, 5, true).dump()));
    const auto t1 = Clock::now();
    while (gauge(server.port(), "ninfer_queue_depth") != 1 && seconds_since(t1) < 5) std::this_thread::sleep_for(milliseconds(20));
    ASSERT_EQ(gauge(server.port(), "ninfer_queue_depth"), 1);
  }
  const auto t2 = Clock::now();
  while (gauge(server.port(), "ninfer_queue_depth") != 0 && seconds_since(t2) < 3) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(gauge(server.port(), "ninfer_queue_depth"), 0);
  EXPECT_LT(seconds_since(t2), 1.0) << "the queue place was not freed at once";
  Conn next(server.port());
  next.send(post_text("/v1/completions", completion({7, 8}, 2).dump()));
  EXPECT_FALSE(next.response(milliseconds(500))) << "the next request was not queued behind the slot holder";
  holder.close();
  const auto r = next.response(milliseconds(20000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A client that leaves during a long prefill frees its slot within a chunk or so, streamed
// or not: the prefill does not run to the end.
TEST(NinferServeHostile, PrefillOfAClientThatLeavesStopsEarly) {
  const fs::path log = temp_log("prefill-cancel");
  ServerProcess server(demo_args({"--max-concurrency", "1", "--prefill-chunk", "16", "--max-context", "8192",
                                  "--request-log", log.string()}));
  const auto prompt = [](int salt) {
    json p = json::array();
    for (int i = 0; i < 2000; ++i) p.push_back(1 + (i * 7919 + salt) % 5000);
    return p;
  };
  // The whole prefill, for scale.
  const auto full = ask(server.port(), post_text("/v1/completions", completion(prompt(0), 1).dump()), milliseconds(120000));
  ASSERT_TRUE(full);
  ASSERT_EQ(full->status, 200) << full->body;
  // The engine logs a request just after its reply is handed over.
  std::vector<json> lines;
  for (int i = 0; i < 200 && lines.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    lines = read_log(log);
  }
  ASSERT_EQ(lines.size(), 1u);
  const double full_s = lines[0]["prefill_s"].get<double>();
  ASSERT_GT(full_s, 1.0) << "the prefill is too quick to interrupt; lengthen the prompt";
  for (bool stream : {true, false}) {
    {
      Conn c(server.port());
      c.send(post_text("/v1/completions", completion(prompt(stream ? 1 : 2), 1, stream).dump()));
      std::this_thread::sleep_for(std::chrono::duration<double>(full_s * 0.2));
    }
    const auto t0 = Clock::now();
    while (read_log(log).size() < lines.size() + 1 && seconds_since(t0) < full_s * 2)
      std::this_thread::sleep_for(milliseconds(20));
    lines = read_log(log);
    ASSERT_EQ(lines.size(), stream ? 2u : 3u);
    EXPECT_EQ(lines.back()["finish_reason"], "cancelled") << "stream " << stream;
    EXPECT_LT(lines.back()["prefill_s"].get<double>(), full_s * 0.6)
        << "stream " << stream << ": the prefill went on after the client left (whole prefill " << full_s << " s)";
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
  fs::remove(log);
}

// A client that stops reading its stream is dropped after --write-timeout-ms of no progress,
// and its request is cancelled (it does not decode on into a buffer nobody reads).
TEST(NinferServeHostile, StreamNobodyReadsIsDroppedAfterTheWriteTimeout) {
  const fs::path log = temp_log("write-timeout");
  ServerProcess server({"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu", "--max-context",
                        "4096", "--max-concurrency", "1", "--write-timeout-ms", "1000", "--request-log", log.string()});
  Conn c(server.port(), "127.0.0.1", 2048);
  json req = completion({1, 2, 3}, 4000, true); // the model's 4096 positions
  req["return_token_ids"] = true;
  req["logprobs"] = 20; // large events (~10 MB in all): the socket's buffers fill long before the end
  ASSERT_TRUE(c.send(post_text("/v1/completions", req.dump())));
  std::vector<json> lines;
  const auto t0 = Clock::now();
  while (lines.empty() && seconds_since(t0) < 60) {
    std::this_thread::sleep_for(milliseconds(50));
    lines = read_log(log);
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["finish_reason"], "cancelled");
  EXPECT_LT(lines[0]["decode_tokens"].get<int>(), 4000);
  EXPECT_EQ(ask(server.port(), post_text("/v1/completions", completion({1, 2}, 2).dump()))->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
  fs::remove(log);
}

// While draining (after SIGTERM) /health says so with 503, so a load balancer stops sending;
// the stream in flight still finishes and the server exits 0.
TEST(NinferServeHostile, HealthIs503WhileDraining) {
  ServerProcess server(demo_args({"--max-concurrency", "1"}));
  Conn stream(server.port());
  stream.send(post_text("/v1/completions", completion({1, 2, 3}, 150, true).dump()));
  const auto t0 = Clock::now();
  while (stream.received().find("data: ") == std::string::npos && seconds_since(t0) < 10) stream.pump(milliseconds(50));
  ASSERT_NE(stream.received().find("data: "), std::string::npos);
  EXPECT_EQ(ask(server.port(), get_text("/health"))->status, 200);
  server.signal(SIGTERM);
  std::this_thread::sleep_for(milliseconds(200));
  const auto h = ask(server.port(), get_text("/health"), milliseconds(2000));
  ASSERT_TRUE(h) << "no /health answer while draining";
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body, nullptr, false)["status"], "draining") << h->body;
  const auto r = stream.response(milliseconds(60000));
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// The API key must match exactly: prefixes, extensions and same-length guesses are refused.
TEST(NinferServeHostile, ApiKeyMustMatchExactly) {
  ServerProcess server(tiny_args({"--api-key", "sesame-open"}));
  const std::string body = completion({1, 2}, 2).dump();
  for (const std::string key : {"sesame", "sesame-opens", "sesame-opem", "", "SESAME-OPEN"}) {
    const auto r = ask(server.port(), post_text("/v1/completions", body, "Authorization: Bearer " + key + "\r\n"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << "key '" << key << "'";
  }
  const auto ok = ask(server.port(), post_text("/v1/completions", body, "Authorization: Bearer sesame-open\r\n"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A few seconds of slow, disconnecting, oversized and valid clients at once: the valid ones
// keep getting answers quickly, and the server's resident memory stays flat. The hostile
// clients come from other addresses than the valid ones (127.0.0.2-4), as they would: one
// address at its --max-connections-per-peer is refused, which is the point of that limit.
TEST(NinferServeHostile, LoadOfHostileClientsLeavesValidClientsServedAndMemoryFlat) {
  ServerProcess server(tiny_args({"--max-pending-requests", "64", "--request-head-timeout-ms", "1500",
                                  "--request-body-timeout-ms", "1500", "--max-body-bytes", "262144"}));
  const int port = server.port();
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  // Slow clients: trickle a head, start again when the server drops them.
  threads.emplace_back([&] {
    std::vector<std::unique_ptr<Conn>> slow;
    const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    std::vector<size_t> at(24, 0);
    for (int i = 0; i < 24; ++i) slow.push_back(std::make_unique<Conn>(port, "127.0.0.2"));
    while (!stop) {
      for (size_t i = 0; i < slow.size(); ++i) {
        if (!slow[i]->send(head.substr(at[i]++ % head.size(), 1))) {
          slow[i] = std::make_unique<Conn>(port, "127.0.0.2");
          at[i] = 0;
        }
      }
      std::this_thread::sleep_for(milliseconds(250));
    }
  });
  // Clients that send a request (streamed or not, or half of one) and hang up.
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; !stop; ++i) {
        Conn c(port, "127.0.0.3");
        const std::string req = post_text("/v1/completions", completion({1, 2, 3, 4}, 100, (i + k) % 2 == 0).dump());
        c.send(i % 3 == 2 ? req.substr(0, req.size() / 2) : req);
        std::this_thread::sleep_for(milliseconds(5 + (i * 13) % 40));
      }
    });
  // Oversized and malformed bodies.
  threads.emplace_back([&] {
    const std::string big(300000, ' '), bad = "{\"prompt\": [1, 2" + std::string(200000, ' ');
    for (int i = 0; !stop; ++i)
      ask(port, post_text("/v1/completions", i % 2 ? big : bad), milliseconds(2000), "127.0.0.4");
  });
  std::mutex mu;
  std::vector<double> latencies;
  int failures = 0;
  int64_t rss_warm = -1;
  // Valid clients keep their connection open, as HTTP client libraries do.
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&, k] {
      std::unique_ptr<Conn> c;
      for (int i = 0; !stop; ++i) {
        const auto t0 = Clock::now();
        if (!c) c = std::make_unique<Conn>(port);
        std::optional<RawResponse> r;
        if (c->send(i % 4 == 3 ? get_text("/health")
                               : post_text("/v1/completions", completion({1 + k, 2, 3}, 4).dump())))
          r = c->response(milliseconds(10000));
        if (!r) c.reset();
        std::lock_guard lock(mu);
        latencies.push_back(seconds_since(t0));
        if (!r || r->status != 200) {
          if (++failures <= 5) ADD_FAILURE() << (r ? std::to_string(r->status) + " " + r->body : "no answer");
        }
      }
    });
  std::this_thread::sleep_for(milliseconds(1500));
  rss_warm = rss_bytes(server.pid());
  std::this_thread::sleep_for(milliseconds(4000));
  const int64_t rss_end = rss_bytes(server.pid());
  stop = true;
  for (auto& t : threads) t.join();
  std::cout << "valid answers " << latencies.size() << ", slowest " << *std::max_element(latencies.begin(), latencies.end())
            << " s; RSS " << rss_warm / 1024 << " -> " << rss_end / 1024 << " KiB\n";
  ASSERT_GT(rss_warm, 0);
  EXPECT_LT(rss_end - rss_warm, int64_t{48} << 20) << "RSS grew from " << rss_warm << " to " << rss_end;
  EXPECT_EQ(failures, 0);
  ASSERT_GE(latencies.size(), 20u) << "valid clients got too few answers in 5.5 s";
  std::sort(latencies.begin(), latencies.end());
  EXPECT_LT(latencies.back(), 3.0) << "slowest valid request";
  EXPECT_EQ(ask(port, get_text("/health"))->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}
