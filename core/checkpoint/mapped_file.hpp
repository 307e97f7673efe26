// A whole file mapped read-only into memory (safetensors data is used in place, never copied
// at open time). Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <filesystem>

namespace ninfer::checkpoint_detail {

class MappedFile {
 public:
  // Throws ninfer::Error naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& file);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;
  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

} // namespace ninfer::checkpoint_detail
