#include "server_process.hpp"

#include <signal.h>
#include <spawn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ninfer::test {

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
} // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args) {
  static int counter = 0;
  log_path_ = (std::filesystem::temp_directory_path() /
               ("ninfer-serve-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".log"))
                  .string();
  std::vector<std::string> argv_s{NINFER_SERVE_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  for (const char* a : {"--host", "127.0.0.1", "--port", "0"}) argv_s.emplace_back(a);
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(std::string("cannot start ") + NINFER_SERVE_BIN);
  const std::regex listening(R"(on http://127\.0\.0\.1:(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string text = read_file(log_path_);
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("ninfer-serve exited at start:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("ninfer-serve did not start listening within 120 s:\n" + read_file(log_path_));
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::filesystem::remove(log_path_);
}

std::unique_ptr<httplib::Client> ServerProcess::client() const {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
  c->set_read_timeout(120, 0);
  return c;
}

void ServerProcess::signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

int ServerProcess::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1; // the destructor kills it
}

std::string ServerProcess::log() const { return read_file(log_path_); }

} // namespace ninfer::test
