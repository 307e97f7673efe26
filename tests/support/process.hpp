// Running a tool as a child process and capturing what it printed.
#pragma once

#include <string>

namespace ninfer::test {

struct ProcessOutput {
  int status = -1;  // exit status, -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` through /bin/sh.
ProcessOutput run_process(const std::string& command);

// Single-quotes `s` for /bin/sh.
std::string shell_quote(const std::string& s);

} // namespace ninfer::test
