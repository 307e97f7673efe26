#include "child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

namespace ninfer::test {

ChildProcess::ChildProcess(const std::string& command) {
  int in[2], out[2], err[2];
  if (pipe(in) || pipe(out) || pipe(err)) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    ::signal(SIGINT, SIG_DFL);
    const std::string cmd = "exec " + command;
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  in_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  ::signal(SIGPIPE, SIG_IGN); // a child that exits early must not kill the test on write
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {in_, out_fd_, err_fd_})
    if (fd >= 0) close(fd);
}

void ChildProcess::write(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(in_, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void ChildProcess::close_stdin() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

void ChildProcess::signal(int sig) { kill(pid_, sig); }

bool ChildProcess::pump(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (out_fd_ < 0 && err_fd_ < 0) return false;
  if (poll(fds, 2, timeout_ms) <= 0) return true;
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    int& fd = i == 0 ? out_fd_ : err_fd_;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    else {
      close(fd);
      fd = -1;
    }
  }
  return true;
}

bool ChildProcess::wait_for(const std::function<bool(const std::string&, const std::string&)>& done,
                            std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done(out_, err_)) {
    if (std::chrono::steady_clock::now() >= end) return false;
    if (!pump(50) && !done(out_, err_)) return false;
  }
  return true;
}

int ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (pump(50))
    if (std::chrono::steady_clock::now() >= end) return -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace ninfer::test
