// What the ninfer-serve tests send and read over HTTP: JSON posts, streamed posts, and the
// `data:` payloads of a server-sent-events stream.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ninfer::test {

struct Reply {
  int status = 0;
  nlohmann::json body;
};

inline Reply post(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                  httplib::Headers headers = {}) {
  auto r = c.Post(path.c_str(), headers, body.dump(), "application/json");
  if (!r) return {-1, nlohmann::json()};
  return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
}

inline Reply post_raw(httplib::Client& c, const std::string& path, const std::string& body) {
  auto r = c.Post(path.c_str(), body, "application/json");
  if (!r) return {-1, nlohmann::json()};
  return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
}

// The `data:` payloads of a server-sent-events stream, in order.
inline std::vector<std::string> sse_data(const std::string& stream) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t end = stream.find("\n\n", pos);
    const std::string event = stream.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    // An event may carry an `event:` line before its data (Anthropic's streams do).
    const size_t data = event.rfind("data: ", 0) == 0 ? 0 : event.find("\ndata: ");
    if (data != std::string::npos) out.push_back(event.substr(data == 0 ? 6 : data + 7));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

// POSTs with "stream": true; `on_data` sees each received piece and may return false to
// hang up. Returns the status and everything received.
inline std::pair<int, std::string> post_stream(httplib::Client& c, const std::string& path, const nlohmann::json& body,
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

} // namespace ninfer::test
