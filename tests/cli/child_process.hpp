// A tool run as a child with pipes on all three streams, for tests that talk to it while it
// runs (ninfer-run --interactive): write lines, wait for output, send signals.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace ninfer::test {

class ChildProcess {
 public:
  // Runs `command` through /bin/sh with `exec`, so signals reach the tool itself.
  explicit ChildProcess(const std::string& command);
  ~ChildProcess(); // kills the child if it still runs
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void write(const std::string& text);
  void close_stdin();
  void signal(int sig);
  // Reads until `done(out, err)` holds or `timeout` passes; returns whether it held.
  bool wait_for(const std::function<bool(const std::string& out, const std::string& err)>& done,
                std::chrono::milliseconds timeout);
  // Reads to the end and returns the exit status (-1: killed by a signal or timed out).
  int wait(std::chrono::milliseconds timeout);

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool pump(int timeout_ms); // one poll round; false when both streams are closed
  pid_t pid_ = -1;
  int in_ = -1, out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_;
  bool reaped_ = false;
};

} // namespace ninfer::test
