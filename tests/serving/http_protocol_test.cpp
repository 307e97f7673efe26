// ninfer-serve's HTTP as RFC 9110 / 9112 and OpenAI's clients expect it, read off the wire with a
// raw socket: HEAD, 405 with Allow, HTTP/1.0 streams, the retrieve-model call, the bearer scheme.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>

#include "raw_http.hpp"
#include "server_process.hpp"
#include "test_support.hpp"

using namespace ninfer::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

std::vector<std::string> tiny_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"--checkpoint", (fixtures_dir() / "tiny-qwen3").string(), "--device", "cpu",
                             "--max-context", "256", "--max-concurrency", "2", "--served-model-name", "org/tiny"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string head_text(const std::string& path) { return "HEAD " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"; }

std::string get_with(const std::string& path, const std::string& header) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + "\r\n\r\n";
}

} // namespace

// HEAD is GET without the content: the same status and Content-Length, no body, and the
// keep-alive connection reads the next response where it starts. Another method on /health is
// 405 naming the allowed ones.
TEST(NinferServeHttp, HeadIsGetWithoutContentAnd405SaysWhatIsAllowed) {
  ServerProcess server(tiny_args());
  Conn c(server.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send(head_text("/health") + get_text("/health")));
  // A HEAD response's Content-Length describes the GET's body: the bytes are read raw.
  for (int i = 0; i < 50 && !c.received().ends_with(R"({"status":"ok"})"); ++i) c.pump(milliseconds(100));
  const std::string& wire = c.received();
  const size_t first_end = wire.find("\r\n\r\n");
  ASSERT_NE(first_end, std::string::npos) << wire;
  EXPECT_TRUE(wire.starts_with("HTTP/1.1 200")) << wire;
  EXPECT_NE(wire.substr(0, first_end).find("Content-Length: 15"), std::string::npos) << wire;
  // The second response follows the first head directly: the HEAD sent no content.
  EXPECT_EQ(wire.compare(first_end + 4, 12, "HTTP/1.1 200"), 0) << wire;
  EXPECT_TRUE(wire.ends_with(R"({"status":"ok"})")) << wire;

  const auto not_allowed = ask(server.port(), post_text("/health", "{}"));
  ASSERT_TRUE(not_allowed);
  EXPECT_EQ(not_allowed->status, 405);
  EXPECT_EQ(not_allowed->headers.at("allow"), "GET, HEAD");
  EXPECT_EQ(json::parse(not_allowed->body)["error"]["type"], "invalid_request_error") << not_allowed->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// An HTTP/1.0 client knows no chunked encoding: its stream is the events themselves, ended by
// the server closing the connection, and they are the HTTP/1.1 stream's once de-chunked.
TEST(NinferServeHttp, AnHttp10StreamIsNotChunkedAndEndsWithTheConnection) {
  ServerProcess server(tiny_args());
  const std::string body =
      json{{"prompt", {1, 2, 3}}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}}.dump();
  const std::string old_request = "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                                  std::to_string(body.size()) + "\r\n\r\n" + body;
  Conn c(server.port());
  ASSERT_TRUE(c.send(old_request));
  ASSERT_TRUE(c.closed_within(milliseconds(20000))) << "the stream must end with the connection";
  const std::string& wire = c.received();
  const size_t head_end = wire.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << wire;
  const std::string head = wire.substr(0, head_end);
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close"), std::string::npos) << head;
  const std::string events = wire.substr(head_end + 4);
  EXPECT_TRUE(events.starts_with("data: {")) << events;
  EXPECT_TRUE(events.ends_with("data: [DONE]\n\n")) << events;

  // The same request over HTTP/1.1, de-chunked: the same events but for the ids and times.
  const auto chunked = ask(server.port(), post_text("/v1/completions", body), milliseconds(20000));
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->headers.at("transfer-encoding"), "chunked");
  const auto texts = [](const std::string& stream) {
    std::string out;
    for (size_t at = stream.find("data: {"); at != std::string::npos; at = stream.find("data: {", at + 1)) {
      const size_t end = stream.find("\n\n", at);
      out += json::parse(stream.substr(at + 6, end - at - 6))["choices"][0]["text"].get<std::string>() + "|";
    }
    return out;
  };
  EXPECT_EQ(texts(events), texts(chunked->body));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// GET /v1/models/{id}: the served model (a name with a '/' too), else 404 model_not_found.
TEST(NinferServeHttp, RetrieveModelAnswersForTheServedNameOnly) {
  ServerProcess server(tiny_args());
  const auto found = ask(server.port(), get_text("/v1/models/org/tiny"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->status, 200) << found->body;
  const json m = json::parse(found->body);
  EXPECT_EQ(m["id"], "org/tiny");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["max_model_len"], 256);
  const auto missing = ask(server.port(), get_text("/v1/models/other"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "model_not_found") << missing->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// The authentication scheme is case-insensitive (RFC 9110 11.1); the key is not.
TEST(NinferServeHttp, TheBearerSchemeIsReadInAnyCase) {
  ServerProcess server(tiny_args({"--api-key", "sesame-open"}));
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"}) {
    const auto r = ask(server.port(), get_with("/v1/models", "Authorization: " + scheme + " sesame-open"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << scheme;
  }
  for (const std::string header : {"Bearer SESAME-OPEN", "Basic sesame-open", "Bearersesame-open", "sesame-open"}) {
    const auto r = ask(server.port(), get_with("/v1/models", "Authorization: " + header));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << header;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}
