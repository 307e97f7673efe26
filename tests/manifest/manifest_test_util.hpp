// A scratch folder per test with manifest files and (empty) checkpoint folders in it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "ninfer/support/error.hpp"
#include "ninfer/manifest/manifest.hpp"

namespace ninfer::test {

class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    root_ = std::filesystem::temp_directory_path() /
            ("ninfer-manifest-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(root_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  const std::filesystem::path& path() const { return root_; }

  std::filesystem::path write(const std::string& rel, const std::string& text) const {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::filesystem::path folder(const std::string& rel) const {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p);
    return p;
  }

 private:
  std::filesystem::path root_;
};

// The message of the ninfer::Error that loading `file` throws (fails the test if none).
inline std::string load_error(const std::filesystem::path& file) {
  try {
    load_manifest(file);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << file << " loaded without an error";
  return {};
}

} // namespace ninfer::test
