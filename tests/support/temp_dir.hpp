// A fresh folder under the system temp dir for one test, removed with everything in it on
// destruction (ctest runs each test in its own process: a folder left behind per process fills
// the disk within a few suite runs).
#pragma once

#include <filesystem>
#include <string>

namespace ninfer::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }
  // Writes `content` to the file `name` in the folder and returns its path.
  std::filesystem::path write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

} // namespace ninfer::test
