// A client on a raw socket, for what an HTTP library hides: the bytes of a response (its head,
// chunks or a body read to the close), slow or partial requests, pipelining, several local
// addresses as several peers.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace ninfer::test {

namespace raw_http {
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;
} // namespace raw_http

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers; // names in lower case
  std::string body;                           // de-chunked
};

// One client connection, driven byte by byte. `from` is the local address to connect from
// (any of 127.0.0.0/8 reaches the server, so tests can be several peers).
class Conn {
 public:
  explicit Conn(int port, const char* from = "127.0.0.1", int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, from, &local.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Conn() { close(); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool connected() const { return connected_; }
  bool send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads what arrives within `timeout`; false once the server closed the connection.
  bool pump(raw_http::Ms timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return true;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }
  const std::string& received() const { return in_; }
  // The next whole response, or nullopt if none came within `timeout` (or the connection
  // closed first).
  std::optional<RawResponse> response(raw_http::Ms timeout) {
    const auto deadline = raw_http::Clock::now() + timeout;
    while (true) {
      if (auto r = take()) return r;
      if (eof_ || raw_http::Clock::now() >= deadline) return std::nullopt;
      pump(std::chrono::duration_cast<raw_http::Ms>(deadline - raw_http::Clock::now()) + raw_http::Ms(1));
    }
  }
  // True if the server closes the connection within `timeout` (what it sent is kept).
  bool closed_within(raw_http::Ms timeout) {
    const auto deadline = raw_http::Clock::now() + timeout;
    while (!eof_ && raw_http::Clock::now() < deadline)
      pump(std::chrono::duration_cast<raw_http::Ms>(deadline - raw_http::Clock::now()) + raw_http::Ms(1));
    return eof_;
  }

 private:
  // Parses one response off the front of in_ if it is complete.
  std::optional<RawResponse> take() {
    const size_t head_end = in_.find("\r\n\r\n");
    if (head_end == std::string::npos) return std::nullopt;
    RawResponse r;
    std::istringstream head(in_.substr(0, head_end));
    std::string line;
    std::getline(head, line);
    if (line.size() < 12) return std::nullopt;
    r.status = std::stoi(line.substr(9, 3));
    while (std::getline(head, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    size_t pos = head_end + 4;
    if (r.status / 100 == 1) { // interim: no body
      in_.erase(0, pos);
      return r;
    }
    if (r.headers.count("content-length")) {
      const size_t n = std::stoul(r.headers["content-length"]);
      if (in_.size() < pos + n) return std::nullopt;
      r.body = in_.substr(pos, n);
      in_.erase(0, pos + n);
      return r;
    }
    if (r.headers.count("transfer-encoding")) {
      std::string body;
      while (true) {
        const size_t eol = in_.find("\r\n", pos);
        if (eol == std::string::npos) return std::nullopt;
        const size_t n = std::stoul(in_.substr(pos, eol - pos), nullptr, 16);
        if (in_.size() < eol + 2 + n + 2) return std::nullopt;
        body += in_.substr(eol + 2, n);
        pos = eol + 2 + n + 2;
        if (n == 0) break;
      }
      r.body = std::move(body);
      in_.erase(0, pos);
      return r;
    }
    if (!eof_) return std::nullopt; // body until close
    r.body = in_.substr(pos);
    in_.clear();
    return r;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string in_;
};

inline std::string post_text(const std::string& path, const std::string& body, const std::string& extra_headers = {}) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}
inline std::string get_text(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"; }

// One GET or POST on a fresh connection; nullopt if no answer within `timeout`.
inline std::optional<RawResponse> ask(int port, const std::string& request,
                                      raw_http::Ms timeout = raw_http::Ms(5000), const char* from = "127.0.0.1") {
  Conn c(port, from);
  if (!c.connected() || !c.send(request)) return std::nullopt;
  return c.response(timeout);
}

} // namespace ninfer::test
