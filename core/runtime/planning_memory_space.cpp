// The memory space of a dry run (BackendOptions::plan_only): a load on it counts every buffer a
// real load would allocate without holding any memory, so the memory plan comes from the very
// code that allocates (ninfer/models/memory_plan.hpp).
#include <cstdint>
#include <vector>

#include "ninfer/runtime/memory_space.hpp"

namespace ninfer {
namespace {

class PlanningMemorySpace final : public MemorySpace {
 public:
  std::string name() const override { return "no memory (a dry run)"; }
  // Distinct addresses in an unmapped range (from 1 TiB up), 256-byte aligned as cudaMalloc's:
  // a buffer's address is never read, but buffers must not compare equal.
  void* allocate(size_t bytes) override {
    constexpr uintptr_t kAlign = 256;
    const uintptr_t at = next_;
    next_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return reinterpret_cast<void*>(at);
  }
  void free(void*, size_t) noexcept override {}
  void copy_in(void*, const void*, size_t) override {}
  void copy_out(void*, const void*, size_t) override {}
  void reserve_results(size_t bytes) override {
    if (bytes > slot_bytes_) slot_bytes_ = bytes;
  }
  size_t result_bytes() const override { return slot_bytes_; }
  void copy_out_to_results(size_t, size_t, const void*, size_t) override {}
  // A dry run reads no results; one slot's worth of zeros keeps a caller that does harmless.
  const void* results(size_t) override {
    results_.assign(slot_bytes_, 0);
    return results_.data();
  }
  void copy_within(void*, const void*, size_t) override {}
  void spill(void*, const void*, size_t) override {}
  void unspill(void*, const void*, size_t) override {}
  void zero(void*, size_t) override {}
  void* stream() const override { return nullptr; }
  void synchronize() override {}

 private:
  uintptr_t next_ = uintptr_t{1} << 40;
  size_t slot_bytes_ = kMinResultBytes;
  std::vector<unsigned char> results_;
};

} // namespace

std::unique_ptr<MemorySpace> make_planning_memory_space() { return std::make_unique<PlanningMemorySpace>(); }

} // namespace ninfer
