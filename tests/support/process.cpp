#include "process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ninfer::test {

ProcessOutput run_process(const std::string& command) {
  static int n = 0;
  const auto err_file = std::filesystem::temp_directory_path() /
                        ("ninfer-proc-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".err");
  ProcessOutput r;
  FILE* f = popen((command + " 2>" + shell_quote(err_file.string())).c_str(), "r");
  std::array<char, 65536> buf;
  size_t got;
  while ((got = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), got);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_file);
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

} // namespace ninfer::test
