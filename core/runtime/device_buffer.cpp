#include "ninfer/runtime/device_buffer.hpp"

#include <utility>

#include "ninfer/runtime/backend.hpp"

namespace ninfer {

const char* memory_use_name(MemoryUse u) {
  switch (u) {
    case MemoryUse::Weights: return "weights";
    case MemoryUse::KvCache: return "kv-cache";
    case MemoryUse::State: return "gdn-state";
    case MemoryUse::PrefixStates: return "prefix-states";
    case MemoryUse::Activations: return "activations";
    case MemoryUse::Workspace: return "workspace";
    case MemoryUse::Count: break;
  }
  return "?";
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)), ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)), use_(o.use_), what_(std::move(o.what_)), format_(std::move(o.format_)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = std::exchange(o.owner_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    use_ = o.use_;
    what_ = std::move(o.what_);
    format_ = std::move(o.format_);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)), ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = std::exchange(o.owner_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::release() noexcept {
  if (owner_ && ptr_) owner_->release(*this);
  owner_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::release() noexcept {
  if (owner_ && ptr_) owner_->release(*this);
  owner_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

} // namespace ninfer
