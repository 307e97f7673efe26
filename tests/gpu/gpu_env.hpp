// What every GPU test needs: the live device (or a skip reason), the plugin chosen for it and
// small RAII device buffers.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ninfer/abi/device_info.h"
#include "ninfer/plugin_host/plugin_host.hpp"

namespace ninfer::test {

struct GpuEnv {
  bool available = false;
  std::string why_not;
  ninfer_device_info device{};
  const LoadedPlugin* plugin = nullptr; // best-scoring plugin for device 0
};

const GpuEnv& gpu();

#define NINFER_REQUIRE_GPU()                                                   \
  do {                                                                         \
    if (!::ninfer::test::gpu().available) GTEST_SKIP() << ::ninfer::test::gpu().why_not; \
  } while (0)

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t rc_ = (expr);                                                  \
    ASSERT_EQ(rc_, cudaSuccess) << #expr << ": " << cudaGetErrorString(rc_);   \
  } while (0)

// A device allocation freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) const;
  void download(void* dst, size_t n) const;
  void poison() const; // every byte 0xFF: a float NaN, so unwritten outputs fail

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

} // namespace ninfer::test
