#include <fmt/format.h>

#include "ninfer/runtime/backend.hpp"

namespace ninfer {

std::string format_bytes(size_t b) {
  if (b >= (size_t{1} << 30)) return fmt::format("{:.2f} GiB", b / double(size_t{1} << 30));
  if (b >= (size_t{1} << 20)) return fmt::format("{:.1f} MiB", b / double(size_t{1} << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

namespace {
std::string human(size_t b) { return format_bytes(b); }
} // namespace

std::string MemoryReport::describe() const {
  std::string s;
  for (size_t i = 0; i < in_use.size(); ++i) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", memory_use_name(static_cast<MemoryUse>(i)), human(in_use[i]));
    if (static_cast<MemoryUse>(i) == MemoryUse::Weights && weights_by_format.size() > 1) {
      std::string parts;
      for (const auto& [format, bytes] : weights_by_format)
        parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", format, human(bytes));
      s += " (" + parts + ")";
    }
  }
  s += fmt::format("; total {} (peak {})", human(total), human(peak));
  if (limit) s += fmt::format(", limit {}", human(limit));
  if (free) s += fmt::format(", device free {}", human(free));
  return s;
}

size_t allocator_overhead(const MemoryReport& r, int32_t device_kind) {
  // CUDA: cudaMalloc's 2 MiB pages for buffers of 1 MiB or more, 512-byte packing below.
  constexpr size_t kCudaPage = size_t{2} << 20, kCudaLarge = size_t{1} << 20, kCudaSmallAlign = 512;
  constexpr size_t kHostAlign = 64; // HostMemorySpace::allocate
  size_t extra = 0;
  for (const auto& [bytes, count] : r.allocation_sizes) {
    const size_t granule = device_kind != NINFER_DEVICE_CUDA ? kHostAlign : bytes >= kCudaLarge ? kCudaPage : kCudaSmallAlign;
    extra += count * ((bytes + granule - 1) / granule * granule - bytes);
  }
  return extra;
}

} // namespace ninfer
