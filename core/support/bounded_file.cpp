#include "ninfer/support/bounded_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

[[noreturn]] void not_regular(const std::filesystem::path& file, mode_t mode) {
  throw Error(fmt::format("{}: not a regular file ({}); point at the file itself", file.string(), kind_of(mode)));
}

} // namespace

std::string byte_limit_string(uint64_t bytes) {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  if (bytes >= kGiB && bytes % kGiB == 0) return fmt::format("{} GiB", bytes / kGiB);
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{} MiB", bytes / kMiB);
  return fmt::format("{} bytes", bytes);
}

void require_regular_file(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0)
    throw Error(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) not_regular(file, st.st_mode);
}

std::string read_bounded_file(const std::filesystem::path& file, uint64_t max_bytes, const std::string& kind) {
  require_regular_file(file);
  // O_NONBLOCK: should the file have been swapped for a FIFO since the check, open() still
  // returns, and fstat below refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) not_regular(file, st.st_mode);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw Error(fmt::format("{}: {} bytes, over the {} limit for {}", file.string(), size,
                            byte_limit_string(max_bytes), kind));
  std::string text(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
    if (n == 0) break; // shrank while being read: take what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

} // namespace ninfer
