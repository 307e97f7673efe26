#include "gpu_env.hpp"

#include <stdexcept>

#include "described_cards.hpp"
#include "ninfer/devices/device.hpp"

namespace ninfer::test {

const GpuEnv& gpu() {
  static GpuEnv* env = [] {
    auto* e = new GpuEnv();
    const Discovery d = discover_devices();
    if (d.cuda.empty()) {
      e->why_not = "no CUDA device (" + d.note + ")";
      return e;
    }
    e->device = d.cuda.front();
    e->plugin = build_plugins().choose(e->device, forced_test_plugin()).chosen;
    if (!e->plugin) {
      e->why_not = std::string("no plugin of this build scores above zero on ") + e->device.name;
      if (!forced_test_plugin().empty()) e->why_not += " (forced: " + forced_test_plugin() + ")";
      return e;
    }
    e->available = true;
    return e;
  }();
  return *env;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
}
DeviceBuffer::~DeviceBuffer() { cudaFree(ptr_); }
void DeviceBuffer::upload(const void* src, size_t n) const {
  if (cudaMemcpy(ptr_, src, n, cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("upload failed");
}
void DeviceBuffer::download(void* dst, size_t n) const {
  if (cudaMemcpy(dst, ptr_, n, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("download failed");
}
void DeviceBuffer::poison() const {
  if (cudaMemset(ptr_, 0xFF, bytes_) != cudaSuccess) throw std::runtime_error("memset failed");
}

} // namespace ninfer::test
