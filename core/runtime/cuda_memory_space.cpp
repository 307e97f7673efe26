// Device memory for CUDA plugins: cudaMalloc'd buffers on one device, copies and memsets on
// the backend's own stream. Every CUDA call is checked where it is made and reported with
// what was being done.
#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "ninfer/support/error.hpp"
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
    // Without page-locked memory the copies still work, through the driver's own staging, and
    // each waits for the stream (copy_out_to_results too).
    if (cudaHostAlloc(&staging_, kStagingBytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      staging_ = nullptr;
    }
    for (cudaEvent_t& e : upload_events_)
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", ordinal_);
    for (cudaEvent_t& e : result_events_)
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", ordinal_);
    reserve_results(kMinResultBytes);
  }
  ~CudaMemorySpace() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    for (cudaEvent_t e : upload_events_) cudaEventDestroy(e);
    for (cudaEvent_t e : result_events_) cudaEventDestroy(e);
    if (staging_) cudaFreeHost(staging_);
    if (results_) cudaFreeHost(results_);
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
  // A small upload (a step's inputs, its sampling rows: one or two per decode step) is copied
  // into one of the page-locked slots and left queued: the host does not wait for a round trip
  // to the device before it launches the step. A slot is written again only after its last copy
  // has left it (its event). Larger uploads come from the caller's pageable memory and wait.
  void copy_in(void* dst, const void* src, size_t bytes) override {
    if (staging_ && bytes <= kUploadBytes) {
      std::lock_guard<std::mutex> staged(staging_mutex_);
      const size_t slot = next_upload_slot_;
      next_upload_slot_ = (slot + 1) % kUploadSlots;
      check(cudaEventSynchronize(upload_events_[slot]), "host-to-device copy (an earlier one)", ordinal_);
      void* from = upload_slot(slot);
      std::memcpy(from, src, bytes);
      check(cudaMemcpyAsync(dst, from, bytes, cudaMemcpyHostToDevice, stream_), "host-to-device copy", ordinal_);
      check(cudaEventRecord(upload_events_[slot], stream_), "cudaEventRecord", ordinal_);
      return;
    }
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "host-to-device copy", ordinal_);
    check(cudaStreamSynchronize(stream_), "host-to-device copy", ordinal_);
  }
  // Waits for the copy: the caller's memory is pageable. A small one lands in the page-locked
  // download area first (a direct transfer instead of the driver's pageable path).
  void copy_out(void* dst, const void* src, size_t bytes) override {
    std::unique_lock<std::mutex> staged(staging_mutex_, std::defer_lock);
    void* to = dst;
    if (staging_ && bytes <= kDownloadBytes) {
      staged.lock();
      to = download_area();
    }
    check(cudaMemcpyAsync(to, src, bytes, cudaMemcpyDeviceToHost, stream_), "device-to-host copy", ordinal_);
    check(cudaStreamSynchronize(stream_), "device-to-host copy (or a kernel before it)", ordinal_);
    if (to != dst) std::memcpy(dst, to, bytes);
  }
  // The result slots are page-locked memory of their own, sized by the model (logits rows of a
  // whole decode step: megabytes); without page-locked memory they are pageable and every copy
  // into them waits.
  void reserve_results(size_t bytes) override {
    if (bytes <= result_bytes_) return;
    check(cudaStreamSynchronize(stream_), "synchronize before growing the result slots", ordinal_);
    if (results_) cudaFreeHost(results_);
    results_ = nullptr;
    if (cudaHostAlloc(&results_, kResultSlots * bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      results_ = nullptr;
      unpinned_results_.assign(kResultSlots * bytes, 0);
    } else {
      unpinned_results_.clear();
      unpinned_results_.shrink_to_fit();
    }
    result_bytes_ = bytes;
  }
  size_t result_bytes() const override { return result_bytes_; }
  // Backend::download_async checks the slot, the offset and the size.
  void copy_out_to_results(size_t slot, size_t offset, const void* src, size_t bytes) override {
    if (!results_) { // no page-locked memory: a copy that waits
      check(cudaMemcpyAsync(result_slot(slot) + offset, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "device-to-host copy", ordinal_);
      check(cudaStreamSynchronize(stream_), "device-to-host copy (or a kernel before it)", ordinal_);
      return;
    }
    check(cudaMemcpyAsync(result_slot(slot) + offset, src, bytes, cudaMemcpyDeviceToHost, stream_),
          "device-to-host copy", ordinal_);
    // Recorded after each copy: waiting for the last one waits for all before it (one stream).
    check(cudaEventRecord(result_events_[slot], stream_), "cudaEventRecord", ordinal_);
  }
  const void* results(size_t slot) override {
    if (results_)
      check(cudaEventSynchronize(result_events_[slot]), "device-to-host copy (or a kernel before it)", ordinal_);
    return result_slot(slot);
  }
  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void free_host(void* p) noexcept override { cudaFreeHost(p); }
  void spill(void* host_dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "device-to-host spill", ordinal_);
  }
  void unspill(void* dst, const void* host_src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "host-to-device restore", ordinal_);
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "device-to-device copy", ordinal_);
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
  // The page-locked staging memory, in two parts: kUploadSlots upload slots and the download
  // area of copy_out.
  static constexpr size_t kUploadSlots = 4, kUploadBytes = size_t{16} << 10, kDownloadBytes = size_t{64} << 10;
  static constexpr size_t kStagingBytes = kUploadSlots * kUploadBytes + kDownloadBytes;
  void* upload_slot(size_t slot) const { return static_cast<char*>(staging_) + slot * kUploadBytes; }
  void* download_area() const { return static_cast<char*>(staging_) + kUploadSlots * kUploadBytes; }
  unsigned char* result_slot(size_t slot) {
    unsigned char* base = results_ ? static_cast<unsigned char*>(results_) : unpinned_results_.data();
    return base + slot * result_bytes_;
  }

  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  void* staging_ = nullptr; // kStagingBytes of page-locked memory, or null
  cudaEvent_t upload_events_[kUploadSlots] = {}; // recorded after each slot's last upload
  size_t next_upload_slot_ = 0;
  cudaEvent_t result_events_[kResultSlots] = {}; // recorded after each copy into the slot
  void* results_ = nullptr;                       // kResultSlots x result_bytes_ page-locked, or null
  size_t result_bytes_ = 0;
  std::vector<unsigned char> unpinned_results_;   // the result slots when page-locked memory failed
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
