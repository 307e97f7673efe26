// Device memory for CUDA plugins: cudaMalloc'd buffers on one device, copies and memsets on
// the backend's own stream. Every CUDA call is checked where it is made and reported with
// what was being done.
#include <fmt/format.h>

#include <cstring>
#include <mutex>

#include "ninfer/error.hpp"
#include "ninfer/runtime/memory_space.hpp"

#ifdef NINFER_WITH_CUDA_RUNTIME
#include <cuda_runtime_api.h>

namespace ninfer {
namespace {

void check(cudaError_t rc, const char* what, int device) {
  if (rc != cudaSuccess)
    throw Error(fmt::format("CUDA device {}: {} failed: {}", device, what, cudaGetErrorString(rc)));
}

class CudaMemorySpace final : public MemorySpace {
 public:
  explicit CudaMemorySpace(const ninfer_device_info& d) : ordinal_(d.ordinal), name_(d.name) {
    check(cudaSetDevice(ordinal_), "cudaSetDevice", ordinal_);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", ordinal_);
    // Without page-locked memory the copies still work, through the driver's own staging.
    if (cudaHostAlloc(&staging_, kStagingBytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      staging_ = nullptr;
    }
  }
  ~CudaMemorySpace() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    if (staging_) cudaFreeHost(staging_);
  }
  std::string name() const override { return fmt::format("CUDA device {} ({})", ordinal_, name_); }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError(); // an out-of-memory result is not sticky; clear it for the caller
      return nullptr;
    }
    return p;
  }
  void free(void* p, size_t) noexcept override { cudaFree(p); }
  // Both directions wait for the copy: the caller's host memory is pageable and may be reused at
  // once. A small copy (a step's inputs, its picked tokens: a few per decode step) goes through
  // the page-locked staging buffer, a direct transfer, instead of the driver's pageable path.
  void copy_in(void* dst, const void* src, size_t bytes) override {
    std::unique_lock<std::mutex> staged(staging_mutex_, std::defer_lock);
    if (staging_ && bytes <= kStagingBytes) {
      staged.lock();
      std::memcpy(staging_, src, bytes);
      src = staging_;
    }
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "host-to-device copy", ordinal_);
    check(cudaStreamSynchronize(stream_), "host-to-device copy", ordinal_);
  }
  void copy_out(void* dst, const void* src, size_t bytes) override {
    std::unique_lock<std::mutex> staged(staging_mutex_, std::defer_lock);
    void* to = dst;
    if (staging_ && bytes <= kStagingBytes) {
      staged.lock();
      to = staging_;
    }
    check(cudaMemcpyAsync(to, src, bytes, cudaMemcpyDeviceToHost, stream_), "device-to-host copy", ordinal_);
    check(cudaStreamSynchronize(stream_), "device-to-host copy (or a kernel before it)", ordinal_);
    if (to != dst) std::memcpy(dst, staging_, bytes);
  }
  void zero(void* dst, size_t bytes) override {
    check(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync", ordinal_);
  }
  void* stream() const override { return stream_; }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize (a kernel failed)", ordinal_); }
  bool can_record() const override { return true; }
  void begin_recording() override {
    // Thread-local mode: another thread's unrelated CUDA calls (a second backend) do not
    // invalidate this capture, while a forbidden call on this thread (a sync) still fails it.
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", ordinal_);
  }
  std::shared_ptr<void> end_recording() override {
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture (a launch could not be recorded)", ordinal_);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t rc = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(rc, "cudaGraphInstantiate", ordinal_);
    return std::shared_ptr<void>(exec, [](void* e) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e)); });
  }
  void abort_recording() noexcept override {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError(); // the failed capture's error is reported by whoever aborted it
  }
  void replay(const void* recording) override {
    check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(const_cast<void*>(recording)), stream_), "cudaGraphLaunch",
          ordinal_);
  }
  size_t free_bytes() const override {
    size_t free = 0, total = 0;
    return cudaMemGetInfo(&free, &total) == cudaSuccess ? free : 0;
  }

 private:
  static constexpr size_t kStagingBytes = size_t{64} << 10;
  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  void* staging_ = nullptr; // kStagingBytes of page-locked memory, or null
  std::mutex staging_mutex_;
};

} // namespace

std::unique_ptr<MemorySpace> make_cuda_memory_space(const ninfer_device_info& device) {
  return std::make_unique<CudaMemorySpace>(device);
}

} // namespace ninfer
#else
namespace ninfer {
std::unique_ptr<MemorySpace> make_cuda_memory_space(const ninfer_device_info& device) {
  throw Error(fmt::format("{}: this build of ninfer has no CUDA runtime", device.name));
}
} // namespace ninfer
#endif
