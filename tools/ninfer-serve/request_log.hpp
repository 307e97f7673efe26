// --request-log FILE: one JSON line per finished request, written by the server from the
// engine's own measurements (queue, prefill, time to first token, decode), so the figures are
// the server's, not a client's.
#pragma once

#include <fstream>
#include <mutex>
#include <string>

#include "ninfer/serving/request_handle.hpp"

namespace ninfer::tools {

class RequestLog {
 public:
  // Opens FILE for appending; throws ninfer::Error when it cannot.
  explicit RequestLog(const std::string& file);
  void write(const serving::ServeResult& r);

 private:
  std::mutex mu_;
  std::ofstream out_;
  std::string file_;
};

} // namespace ninfer::tools
