// ninfer-serve's HTTP/1.1 front end, on Boost.Beast/Asio. A connection costs a socket and a
// buffer, never a thread: request heads and bodies are read asynchronously, each under its own
// deadline and size limits; connections are budgeted in total and per peer, apart from the
// model's slots; requests pipelined on a connection are answered in order; and a client that
// leaves while its request is queued or running is noticed at once (its socket is watched
// while the answer is prepared), so the request can be cancelled.
//
// The handler runs on a small worker pool (GET requests: on the I/O thread, so they must be
// quick) and answers through an Exchange, from any thread.
// docs/serving.md lists the limits and why this library (not cpp-httplib 0.11).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ninfer::tools {

struct HttpLimits {
  int64_t max_connections = 512;          // open connections in all
  int64_t max_connections_per_peer = 64;  // from one client address
  std::chrono::milliseconds head_timeout{10'000};  // from the first byte awaited to the end of the head
  std::chrono::milliseconds body_timeout{60'000};  // from the end of the head to the end of the body
  std::chrono::milliseconds write_timeout{60'000}; // a client that reads none of a reply this long is dropped
  uint64_t max_body_bytes = 16ull << 20;
  uint32_t max_header_bytes = 16 * 1024; // request line and headers together
  int64_t max_headers = 100;
};

struct HttpRequest {
  std::string method;
  std::string path; // without the query string
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string peer; // the client's address

  // The first header of that name (case-insensitive), or "".
  std::string header(std::string_view name) const;
};

class Connection;

// The header a busy answer carries (429 queue full, 503 busy or draining, Anthropic's 529), as the
// OpenAI and Anthropic APIs send it: try again in a second, about what a few decode steps take to
// free a slot. Empty for any other status.
inline std::string retry_after_header(int status) {
  return status == 429 || status == 503 || status == 529 ? "Retry-After: 1\r\n" : "";
}

// One request's answer. Thread-safe; calls after the connection is gone do nothing.
class Exchange {
 public:
  explicit Exchange(std::weak_ptr<Connection> connection) : connection_(std::move(connection)) {}

  // A whole reply; `extra_headers` are header lines, each ending in "\r\n" ("Allow: GET\r\n").
  void reply(int status, std::string content_type, std::string body, std::string extra_headers = {});
  // A streamed 200 reply (chunked): start, then pieces, then end.
  void start_stream(std::string content_type);
  void send(std::string piece);
  void end_stream();
  // Runs `f` (on an I/O thread) if the client leaves before the reply is written; at once if
  // it has already left.
  void on_disconnect(std::function<void()> f);
  // Kept alive until the reply's last byte is written, or the connection is gone.
  void hold(std::shared_ptr<void> token);

 private:
  std::weak_ptr<Connection> connection_;
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, std::shared_ptr<Exchange>)>;
  // `handler` runs for every request read whole: on one of `workers` threads, or for a GET on
  // the I/O thread that read it.
  HttpServer(HttpLimits limits, Handler handler, int io_threads = 2, int workers = 4);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; returns the port (port 0: any free one). Throws ninfer::Error.
  int listen(const std::string& host, int port);
  // Serves until stop(); returns after the I/O threads have ended.
  void run();
  // Stops accepting and closes every connection. Callable from any thread.
  void stop();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

} // namespace ninfer::tools
