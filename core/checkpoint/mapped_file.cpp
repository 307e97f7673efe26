#include "mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ninfer/support/bounded_file.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::checkpoint_detail {

MappedFile::MappedFile(const std::filesystem::path& file) : path_(file) {
  // Checked before open(): opening a FIFO blocks until something writes to it.
  require_regular_file(file);
  // O_NONBLOCK: should the file have been swapped for a FIFO since the check, open() still
  // returns, and fstat below refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open {}: {}", file.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", file.string()));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    // MAP_PRIVATE + PROT_READ: pages come from the page cache on first touch; nothing is read now.
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot memory-map {} ({} bytes): {}", file.string(), size_, std::strerror(err)));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd); // the mapping keeps the file alive
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace ninfer::checkpoint_detail
