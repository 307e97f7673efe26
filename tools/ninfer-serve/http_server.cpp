#include "http_server.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "anthropic_response.hpp"
#include "api_error.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::tools {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Ms = std::chrono::milliseconds;

namespace {

// Bytes of pipelined requests read ahead while a reply is prepared; beyond that the socket is
// no longer watched until the reply is written (TCP then holds the client back).
constexpr size_t kMaxReadAhead = 64 * 1024;
// How long a connection that is being closed after an error keeps reading (and discarding),
// so that the client receives the error rather than a reset.
constexpr Ms kLinger{1000};
// The write deadline of a refusal (over the connection budget).
constexpr Ms kRefusalWrite{2000};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

std::string error_json(int status, const std::string& message, const std::string& code = {}) {
  return ApiError(status, message, status >= 500 ? "server_error" : "invalid_request_error", {}, code).body().dump();
}

bool is_anthropic_path(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/v1/messages" || path.starts_with("/v1/messages/");
}

std::string str(beast::string_view s) { return std::string(s.data(), s.size()); }

std::string head(int status, std::string_view content_type, std::string_view extra, bool keep_alive) {
  return fmt::format("HTTP/1.1 {} {}\r\nServer: ninfer\r\nContent-Type: {}\r\n{}{}\r\n", status,
                     str(http::obsolete_reason(static_cast<http::status>(status))), content_type, extra,
                     keep_alive ? "" : "Connection: close\r\n");
}

} // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

struct HttpServer::Impl {
  Impl(HttpLimits l, Handler h, int io_threads, int workers)
      : limits(l), handler(std::move(h)), io_threads(io_threads), workers(static_cast<size_t>(workers)) {}

  HttpLimits limits;
  Handler handler;
  int io_threads;
  // Declared before the I/O context: connections still queued in it release their budget
  // here when it is destroyed.
  std::mutex mutex;
  int64_t open = 0;
  std::map<std::string, int64_t> per_peer;
  std::map<Connection*, std::weak_ptr<Connection>> live;
  bool stopped = false;

  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  asio::thread_pool workers;

  void accept();
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl& server, std::string peer, bool counted)
      : server_(server), socket_(std::move(socket)), timer_(socket_.get_executor()), peer_(std::move(peer)),
        counted_(counted) {}

  ~Connection() {
    std::lock_guard lock(server_.mutex);
    server_.live.erase(this);
    if (!counted_) return;
    --server_.open;
    if (--server_.per_peer[peer_] == 0) server_.per_peer.erase(peer_);
  }

  void start() {
    {
      std::lock_guard lock(server_.mutex);
      server_.live[this] = weak_from_this();
    }
    read_head();
  }

  // Over the connection budget: a 503 naming the limit, then close.
  void refuse(const std::string& message) {
    phase_ = Phase::Reply;
    keep_alive_ = false;
    write_timeout_ = kRefusalWrite;
    queue(head(503, "application/json",
               "Content-Length: " + std::to_string(error_json(503, message).size()) + "\r\n" + retry_after_header(503),
               false) +
          error_json(503, message, "too_many_connections"));
    reply_done_ = true;
    flush();
  }

  template <class F>
  void run(F f) {
    asio::post(socket_.get_executor(), [self = shared_from_this(), f = std::move(f)]() mutable { f(*self); });
  }

  // Exchange operations (on this connection's strand).
  // A HEAD request gets the GET reply's head alone (RFC 9110: no content).
  void reply(int status, const std::string& content_type, const std::string& body, const std::string& extra) {
    if (gone_ || reply_started_) return;
    reply_started_ = reply_done_ = true;
    queue(head(status, content_type, extra + "Content-Length: " + std::to_string(body.size()) + "\r\n", keep_alive_) +
          (head_only_ ? std::string() : body));
    flush();
  }
  // HTTP/1.1 streams are chunked; an HTTP/1.0 client knows no chunks (RFC 9112), so its stream
  // is the bytes themselves, ended by closing the connection.
  void start_stream(const std::string& content_type) {
    if (gone_ || reply_started_) return;
    reply_started_ = true;
    if (http10_) keep_alive_ = false;
    queue(head(200, content_type, http10_ ? "Cache-Control: no-cache\r\n" : "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
               keep_alive_));
    flush();
  }
  void send(const std::string& piece) {
    if (gone_ || !reply_started_ || reply_done_ || piece.empty()) return;
    queue(http10_ ? piece : fmt::format("{:x}\r\n", piece.size()) + piece + "\r\n");
    flush();
  }
  void end_stream() {
    if (gone_ || !reply_started_ || reply_done_) return;
    reply_done_ = true;
    queue(http10_ ? std::string() : std::string("0\r\n\r\n")); // an empty write still ends the reply (on_written)
    flush();
  }
  void on_disconnect(std::function<void()> f) {
    if (gone_) f();
    else on_gone_.push_back(std::move(f));
  }
  void hold(std::shared_ptr<void> token) {
    if (!gone_) held_.push_back(std::move(token));
  }
  void close_now() { client_left(); }

 private:
  enum class Phase { Head, Body, Reply, Linger };

  const HttpLimits& limits() const { return server_.limits; }

  void arm(Ms d) {
    const uint64_t seq = ++deadline_seq_;
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), seq](beast::error_code ec) {
      if (!ec && seq == self->deadline_seq_) self->on_deadline();
    });
  }
  void disarm() {
    ++deadline_seq_;
    timer_.cancel();
  }

  void on_deadline() {
    switch (phase_) {
      case Phase::Head:
      case Phase::Body:
        timed_out_ = true;
        socket_.cancel(); // the read completes with operation_aborted and answers 408
        break;
      case Phase::Reply: // the client has read nothing of the reply for write_timeout
        spdlog::debug("{}: dropped: the reply was not read within the write timeout", peer_);
        client_left();
        break;
      case Phase::Linger:
        close();
        break;
    }
  }

  void read_head() {
    if (gone_) return;
    if (watching_) { // a watch read is pending: resume once it completes
      resume_read_ = true;
      socket_.cancel();
      return;
    }
    phase_ = Phase::Head;
    timed_out_ = false;
    reply_started_ = reply_done_ = false;
    http10_ = head_only_ = false;
    parser_.emplace();
    parser_->header_limit(limits().max_header_bytes);
    parser_->body_limit(limits().max_body_bytes);
    arm(limits().head_timeout);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_head(ec); });
  }

  // A read error before a request was taken: a timeout, a limit, malformed HTTP or the end.
  void read_failed(beast::error_code ec, bool body) {
    if (timed_out_) {
      if (!body && !parser_->got_some() && buffer_.size() == 0) return close(); // idle: quietly
      return fail(408, body ? fmt::format("the request body did not arrive within {} ms (--request-body-timeout-ms)",
                                          limits().body_timeout.count())
                            : fmt::format("the request head did not arrive within {} ms (--request-head-timeout-ms)",
                                          limits().head_timeout.count()));
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted)
      return close();
    if (ec == http::error::body_limit)
      return fail(413, fmt::format("the request body is larger than {} bytes (--max-body-bytes)", limits().max_body_bytes));
    if (ec == http::error::header_limit)
      return fail(431, fmt::format("the request head is larger than {} bytes (--max-header-bytes)",
                                   limits().max_header_bytes));
    fail(400, "malformed HTTP request: " + ec.message());
  }

  void on_head(beast::error_code ec) {
    if (ec) return read_failed(ec, false);
    const auto& h = parser_->get();
    if (std::distance(h.begin(), h.end()) > limits().max_headers)
      return fail(431, fmt::format("the request has more than {} header fields (--max-headers)", limits().max_headers));
    phase_ = Phase::Body;
    arm(limits().body_timeout);
    const auto expect = h[http::field::expect];
    if (!parser_->is_done() && iequals(std::string_view(expect.data(), expect.size()), "100-continue")) {
      continue_ = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(continue_), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->read_failed(ec, true);
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_body({});
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec) return read_failed(ec, true);
    disarm();
    phase_ = Phase::Reply;
    write_timeout_ = limits().write_timeout;
    http::request<http::string_body> msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();
    http10_ = msg.version() < 11;
    head_only_ = msg.method() == http::verb::head;
    HttpRequest req;
    // HEAD is answered as GET, less the content (reply()).
    req.method = head_only_ ? std::string("GET") : str(msg.method_string());
    const std::string_view target(msg.target().data(), msg.target().size());
    req.path = std::string(target.substr(0, target.find('?')));
    req.body = std::move(msg.body());
    for (const auto& f : msg) req.headers.emplace_back(str(f.name_string()), str(f.value()));
    req.peer = peer_;
    auto ex = std::make_shared<Exchange>(weak_from_this());
    watch();
    const auto handle = [&server = server_, ex](const HttpRequest& req) {
      try {
        server.handler(req, ex);
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", req.method, req.path, e.what());
        ex->reply(500, "application/json", error_json(500, e.what()));
      }
    };
    // GETs (/health, /metrics, /v1/models) are quick: answered here, so that they never wait
    // behind requests being parsed and tokenised on the workers.
    if (req.method == "GET") return handle(req);
    asio::post(server_.workers, [handle, req = std::move(req)] { handle(req); });
  }

  // While the reply is prepared, keep reading: pipelined requests are kept for later, and the
  // end of the stream (or a reset) means the client has left.
  void watch() {
    if (watching_ || gone_ || buffer_.size() >= kMaxReadAhead) return;
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->watching_ = false;
      if (!ec) self->buffer_.commit(n);
      if (self->resume_read_) {
        self->resume_read_ = false;
        return self->read_head();
      }
      if (!ec) {
        if (self->phase_ == Phase::Reply) self->watch();
        return;
      }
      if (ec != asio::error::operation_aborted) self->client_left();
    });
  }

  void fail(int status, const std::string& message) {
    phase_ = Phase::Reply;
    keep_alive_ = false;
    write_timeout_ = limits().write_timeout;
    reply_started_ = true;
    reply(status, message);
  }
  void reply(int status, const std::string& message) {
    // Once the request line is read (the parser sets the target then, before the headers),
    // the refusal takes its API's shape: Anthropic's under /v1/messages.
    bool anthropic = false;
    if (parser_) {
      const auto target = parser_->get().target();
      anthropic = is_anthropic_path(std::string_view(target.data(), target.size()));
    }
    const std::string body =
        anthropic ? anthropic_error(ApiError(status, message)).body.dump() : error_json(status, message);
    queue(head(status, "application/json", "Content-Length: " + std::to_string(body.size()) + "\r\n", false) + body);
    reply_done_ = true;
    flush();
  }

  void queue(std::string bytes) { out_.push_back(std::move(bytes)); }

  void flush() {
    if (writing_ || gone_ || out_.empty()) return;
    writing_ = true;
    writing_buf_.clear();
    for (std::string& s : out_) writing_buf_ += s;
    out_.clear();
    arm(write_timeout_);
    asio::async_write(socket_, asio::buffer(writing_buf_),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_written(ec); });
  }

  void on_written(beast::error_code ec) {
    writing_ = false;
    if (ec) return client_left();
    if (!out_.empty()) return flush();
    disarm();
    if (!reply_done_) return;
    // The reply is out: what it held may go, and the next request may be read.
    held_.clear();
    on_gone_.clear();
    if (!keep_alive_) return linger();
    read_head();
  }

  // Closes after an error reply: stop sending, read and discard what the client still sends
  // (a reset would lose the reply), for a little while.
  void linger() {
    phase_ = Phase::Linger;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(kLinger);
    discard();
  }
  void discard() {
    if (watching_) return; // the pending watch read ends on its own
    socket_.async_read_some(asio::buffer(discard_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->discard();
    });
  }

  void client_left() {
    if (gone_) return;
    gone_ = true;
    auto callbacks = std::move(on_gone_);
    on_gone_.clear();
    for (auto& f : callbacks) f();
    close();
  }

  void close() {
    gone_ = true;
    disarm();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    held_.clear();
    on_gone_.clear();
    out_.clear();
  }

  HttpServer::Impl& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  bool counted_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Phase phase_ = Phase::Head;
  uint64_t deadline_seq_ = 0;
  bool timed_out_ = false;
  Ms write_timeout_{60'000};
  std::deque<std::string> out_;
  std::string writing_buf_, continue_;
  char discard_buf_[4096];
  bool writing_ = false, watching_ = false, resume_read_ = false;
  bool keep_alive_ = true, reply_started_ = false, reply_done_ = false, gone_ = false;
  bool http10_ = false, head_only_ = false; // of the request being answered
  std::vector<std::function<void()>> on_gone_;
  std::vector<std::shared_ptr<void>> held_;
};

// Exchange: every call hops onto the connection's strand.
void Exchange::reply(int status, std::string content_type, std::string body, std::string extra_headers) {
  if (auto c = connection_.lock())
    c->run([status, ct = std::move(content_type), b = std::move(body), x = std::move(extra_headers)](Connection& c) {
      c.reply(status, ct, b, x);
    });
}
void Exchange::start_stream(std::string content_type) {
  if (auto c = connection_.lock()) c->run([ct = std::move(content_type)](Connection& c) { c.start_stream(ct); });
}
void Exchange::send(std::string piece) {
  if (auto c = connection_.lock()) c->run([p = std::move(piece)](Connection& c) { c.send(p); });
}
void Exchange::end_stream() {
  if (auto c = connection_.lock()) c->run([](Connection& c) { c.end_stream(); });
}
void Exchange::on_disconnect(std::function<void()> f) {
  if (auto c = connection_.lock()) c->run([f = std::move(f)](Connection& c) mutable { c.on_disconnect(std::move(f)); });
  else f();
}
void Exchange::hold(std::shared_ptr<void> token) {
  if (auto c = connection_.lock()) c->run([t = std::move(token)](Connection& c) mutable { c.hold(std::move(t)); });
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      beast::error_code e;
      const auto remote = socket.remote_endpoint(e);
      const std::string peer = e ? std::string("?") : remote.address().to_string();
      std::string refusal;
      {
        std::lock_guard lock(mutex);
        if (open >= limits.max_connections)
          refusal = fmt::format("the server has {} connections open, its limit (--max-connections): retry later", open);
        else if (per_peer[peer] >= limits.max_connections_per_peer)
          refusal = fmt::format("{} has {} connections open, the limit per client (--max-connections-per-peer): close "
                                "some or retry later",
                                peer, per_peer[peer]);
        else {
          ++open;
          ++per_peer[peer];
        }
        if (per_peer[peer] == 0) per_peer.erase(peer);
      }
      spdlog::debug("connection from {}{}", peer, refusal.empty() ? "" : ": refused, " + refusal);
      auto c = std::make_shared<Connection>(std::move(socket), *this, peer, refusal.empty());
      if (refusal.empty())
        c->run([](Connection& c) { c.start(); });
      else
        c->run([refusal](Connection& c) { c.refuse(refusal); });
    } else {
      // Out of file descriptors, say: back off a little rather than spin on the error.
      spdlog::warn("accept: {}; retrying in 100 ms", ec.message());
      retry.expires_after(Ms(100));
      retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    accept();
  });
}

HttpServer::HttpServer(HttpLimits limits, Handler handler, int io_threads, int workers)
    : impl_(std::make_shared<Impl>(limits, std::move(handler), io_threads, workers)) {}

HttpServer::~HttpServer() {
  stop();
  impl_->workers.join();
}

int HttpServer::listen(const std::string& host, int port) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw Error(fmt::format("--host {}: not an IP address ({})", host, ec.message()));
  const tcp::endpoint ep(address, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("cannot listen on {}:{}: {} (is the port in use? try --port)", host, port, ec.message()));
  return a.local_endpoint().port();
}

void HttpServer::run() {
  impl_->accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->io_threads; ++i) threads.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (auto& t : threads) t.join();
}

void HttpServer::stop() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
    for (auto& [p, w] : impl_->live)
      if (auto c = w.lock()) open.push_back(std::move(c));
  }
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->retry.cancel();
  });
  for (auto& c : open) c->run([](Connection& c) { c.close_now(); });
}

} // namespace ninfer::tools
