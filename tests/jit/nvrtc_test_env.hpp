// What the jit tests share: skip (with NVRTC's own reason) where the machine has no libnvrtc.
// Compiling needs NVRTC but no GPU, so these tests run in CI wherever the toolkit is installed.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ninfer/support/error.hpp"
#include "ninfer/jit/nvrtc.hpp"

namespace ninfer::test {

inline bool have_nvrtc(std::string* why) {
  try {
    jit::nvrtc_version();
    return true;
  } catch (const Error& e) {
    *why = e.what();
    return false;
  }
}

} // namespace ninfer::test

#define NINFER_REQUIRE_NVRTC()                                  \
  do {                                                          \
    std::string why_;                                           \
    if (!::ninfer::test::have_nvrtc(&why_)) GTEST_SKIP() << why_; \
  } while (0)
