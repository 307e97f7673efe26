// Where a backend's buffers live and how bytes move in and out of them. The host space serves
// host plugins (the CPU reference); a CUDA space (cudaMalloc, cudaMemcpyAsync on the backend's
// stream) serves CUDA plugins. Model code sees neither: it talks to Backend.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ninfer/abi/device_info.h"

namespace ninfer {

struct LoadedPlugin;

class MemorySpace {
 public:
  virtual ~MemorySpace() = default;
  virtual std::string name() const = 0;
  // nullptr when the memory is not there (the backend turns that into an error that says what).
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* p, size_t bytes) noexcept = 0;
  // host -> space. The host's bytes may be reused when it returns; the copy itself may still be
  // queued behind the stream's work (ordered before anything issued after it).
  virtual void copy_in(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_out(void* dst, const void* src, size_t bytes) = 0; // space -> host, waits for the stream
  // Result slots: kResultSlots areas of host memory (page-locked on a device) that copies land in
  // without the host waiting. Each holds kMinResultBytes until reserve_results grows them all (a
  // model reserves its largest step's ids, log-probabilities and logits rows at load; growing
  // waits for the stream and is not for the middle of a run).
  static constexpr size_t kResultSlots = 4, kMinResultBytes = size_t{16} << 10;
  virtual void reserve_results(size_t bytes) = 0;
  virtual size_t result_bytes() const = 0;
  // space -> result slot `slot` at byte `offset`, without waiting; results(slot) waits for every
  // copy into that slot issued so far (only) and returns the slot's bytes. Several copies may
  // fill one slot (a step's ids, then the logits rows the host asked for).
  virtual void copy_out_to_results(size_t slot, size_t offset, const void* src, size_t bytes) = 0;
  virtual const void* results(size_t slot) = 0;
  // space -> space, ordered with the stream's work.
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;
  // Host memory that bytes of the space spill to and come back from (the prefix cache's host
  // tier): page-locked on a device, so spill() (space -> it) and unspill() (it -> space) are
  // queued on the stream like the ops and the host never waits; nullptr when it cannot be had.
  // The host space's is plain memory and its copies are memcpy.
  virtual void* allocate_host(size_t bytes);
  virtual void free_host(void* p) noexcept;
  virtual void spill(void* host_dst, const void* src, size_t bytes) { copy_out(host_dst, src, bytes); }
  virtual void unspill(void* dst, const void* host_src, size_t bytes) { copy_in(dst, host_src, bytes); }
  virtual void zero(void* dst, size_t bytes) = 0;
  // The stream ops run on (a cudaStream_t), or nullptr for host execution.
  virtual void* stream() const = 0;
  virtual void synchronize() = 0;
  // Bytes still free in the space (the device's free memory; the host's MemAvailable), or 0
  // when unknown.
  virtual size_t free_bytes() const { return 0; }

  // Recording (CUDA graphs): between begin_recording() and end_recording() the stream records
  // the work issued to it instead of running it; end_recording() returns the instantiated graph
  // (opaque, owned by the pointer) and replay() launches it. A space that cannot record (the
  // host space) says so with can_record() and throws from the others.
  virtual bool can_record() const { return false; }
  virtual void begin_recording();
  virtual std::shared_ptr<void> end_recording();
  virtual void abort_recording() noexcept {}
  virtual void replay(const void* recording);
};

// Page-aligned host memory; copies are memcpy. Its free_bytes() is the kernel's MemAvailable.
std::unique_ptr<MemorySpace> make_host_memory_space();

// A space that holds nothing (BackendOptions::plan_only): allocate() hands out distinct,
// aligned addresses that must never be dereferenced, and copies, zeroing and waits do nothing.
std::unique_ptr<MemorySpace> make_planning_memory_space();

// cudaMalloc'd memory on one CUDA device, copies on the space's own stream.
std::unique_ptr<MemorySpace> make_cuda_memory_space(const ninfer_device_info& device);

// The space for a plugin on a device. Throws ninfer::Error when this core cannot provide one.
std::unique_ptr<MemorySpace> make_memory_space(const LoadedPlugin& plugin, const ninfer_device_info& device);

} // namespace ninfer
