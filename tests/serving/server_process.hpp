// A real ninfer-serve process for the tests: started on a free loopback port (--port 0; the
// port is read from its stderr), stopped with SIGTERM, its exit status reported.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace ninfer::test {

class ServerProcess {
 public:
  // Starts `NINFER_SERVE_BIN args... --host 127.0.0.1 --port 0` and waits until it listens.
  explicit ServerProcess(const std::vector<std::string>& args);
  ~ServerProcess(); // SIGKILL if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` without waiting (stop() then collects the exit status).
  void signal(int sig) const;
  std::unique_ptr<httplib::Client> client() const;
  // SIGTERM, then waits; returns the exit status (-1 when killed by a signal or stuck).
  int stop();
  std::string log() const; // its stderr so far

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string log_path_;
};

} // namespace ninfer::test
