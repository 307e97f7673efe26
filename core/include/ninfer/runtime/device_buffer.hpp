// Memory the ops of a backend read and write: plain host memory for a host plugin, device
// memory for a CUDA plugin. Model code never dereferences it; it hands pointers into it to ops
// and moves data in and out through Backend::upload / download.
#pragma once

#include <cstddef>
#include <string>

namespace ninfer {

class Backend;

// What a buffer holds, for the memory budget printed at startup and for error messages.
// PrefixStates: the serving prefix cache's copies of Gated DeltaNet state (ModelOptions::prefix_states).
enum class MemoryUse { Weights, KvCache, State, PrefixStates, Activations, Workspace, Count };
const char* memory_use_name(MemoryUse u);

// Move-only owner of one allocation; returns it to its backend when destroyed. A default-
// constructed buffer is empty.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }
  MemoryUse use() const { return use_; }
  const std::string& what() const { return what_; }
  // Weights: their storage format for the memory budget ("bfloat16", "gptq int4 g128"); "" otherwise.
  const std::string& weight_format() const { return format_; }

 private:
  friend class Backend;
  void release() noexcept;
  Backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemoryUse use_ = MemoryUse::Activations;
  std::string what_;
  std::string format_;
};

// Move-only owner of host memory a backend spills device bytes to and restores them from
// (Backend::allocate_host: page-locked on a CUDA device); returned to its backend when destroyed.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

 private:
  friend class Backend;
  void release() noexcept;
  Backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

} // namespace ninfer
