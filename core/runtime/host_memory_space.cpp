// Host memory for host plugins, and the factory that picks a memory space for a plugin.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ninfer/support/error.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/memory_space.hpp"

namespace ninfer {
namespace {

// The kernel's estimate of what can be allocated without swapping (free memory plus the page
// cache and reclaimable slabs it can drop), from /proc/meminfo; 0 where there is none.
size_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

class HostMemorySpace final : public MemorySpace {
 public:
  std::string name() const override { return "host memory"; }
  void* allocate(size_t bytes) override {
    // 64-byte alignment keeps every row that starts at a multiple of 16 floats on a cache line.
    constexpr size_t kAlign = 64;
    return std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  }
  void free(void* p, size_t) noexcept override { std::free(p); }
  void copy_in(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_out(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void reserve_results(size_t bytes) override {
    if (bytes <= slot_bytes_) return;
    slot_bytes_ = bytes;
    results_.assign(kResultSlots * slot_bytes_, 0);
  }
  size_t result_bytes() const override { return slot_bytes_; }
  void copy_out_to_results(size_t slot, size_t offset, const void* src, size_t bytes) override {
    std::memcpy(results_.data() + slot * slot_bytes_ + offset, src, bytes);
  }
  const void* results(size_t slot) override { return results_.data() + slot * slot_bytes_; }
  void copy_within(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void* stream() const override { return nullptr; }
  void synchronize() override {}
  size_t free_bytes() const override { return mem_available(); }

 private:
  size_t slot_bytes_ = kMinResultBytes;
  std::vector<unsigned char> results_ = std::vector<unsigned char>(kResultSlots * kMinResultBytes);
};

} // namespace

std::unique_ptr<MemorySpace> make_host_memory_space() { return std::make_unique<HostMemorySpace>(); }

void* MemorySpace::allocate_host(size_t bytes) {
  constexpr size_t kAlign = 64;
  return std::aligned_alloc(kAlign, (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign);
}
void MemorySpace::free_host(void* p) noexcept { std::free(p); }

void MemorySpace::begin_recording() { throw Error(fmt::format("{} cannot record launches", name())); }
std::shared_ptr<void> MemorySpace::end_recording() { throw Error(fmt::format("{} cannot record launches", name())); }
void MemorySpace::replay(const void*) { throw Error(fmt::format("{} cannot replay recordings", name())); }

std::unique_ptr<MemorySpace> make_memory_space(const LoadedPlugin& plugin, const ninfer_device_info& device) {
  if (device.kind == NINFER_DEVICE_CPU && (plugin.abi->capabilities & NINFER_CAP_HOST_EXECUTION))
    return make_host_memory_space();
  if (device.kind == NINFER_DEVICE_CUDA && (plugin.abi->capabilities & NINFER_CAP_CUDA))
    return make_cuda_memory_space(device);
  throw Error(fmt::format("plugin {} cannot run on {}: it has no memory space there", plugin.name(), device.name));
}

} // namespace ninfer
