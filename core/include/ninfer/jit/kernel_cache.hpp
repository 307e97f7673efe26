// On-disk cache of run-time compiled kernels (NVRTC output), one file per key.
//
// A key is a 64-bit FNV-1a hash of everything that decides the compiled bytes: the source, the
// options, the name expressions, the target architecture, the NVRTC version and the payload
// kind (see jit/nvrtc.hpp, which computes it). A file is
//
//   header (40 bytes, little-endian): magic "NINFKC\0\1", u32 format version, u32 payload kind,
//                                     u64 key, u64 payload length, u64 FNV-1a of the payload
//   payload: the compiled image and the lowered names of the name expressions
//
// Writes are atomic: the entry goes to a temporary file in the same folder, is fsync'ed and
// renamed over the final name, so a concurrent reader sees the old file, the new file or none,
// never half of one. A file whose header or checksum does not match is reported at debug
// level, deleted and treated as a miss (the caller rebuilds and stores it again).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ninfer/support/hash.hpp"

namespace ninfer::jit {

// The core's FNV-1a (ninfer/support/hash.hpp), for the cache keys and payload checksums.
using ninfer::fnv1a64;
using ninfer::kFnvOffset;
using ninfer::kFnvPrime;

// Incremental key builder: each field is length-prefixed, so ("ab","c") and ("a","bc") differ.
class KeyHasher {
 public:
  KeyHasher& add(std::string_view field);
  KeyHasher& add(uint64_t value);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kFnvOffset;
};

enum class PayloadKind : uint32_t { Cubin = 1, Ptx = 2 };

// What a cache file holds.
struct CacheEntry {
  PayloadKind kind = PayloadKind::Cubin;
  std::string image;                                          // cubin bytes or PTX text
  std::vector<std::pair<std::string, std::string>> lowered;   // name expression -> mangled name
  bool operator==(const CacheEntry&) const = default;
};

// $NINFER_CACHE_DIR, else $XDG_CACHE_HOME/ninfer/kernels, else ~/.cache/ninfer/kernels (both
// only when set and non-empty).
std::filesystem::path default_kernel_cache_dir();

class KernelCache {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr std::size_t kHeaderBytes = 40;

  // The folder is created on the first store.
  explicit KernelCache(std::filesystem::path dir = default_kernel_cache_dir());

  const std::filesystem::path& dir() const { return dir_; }
  // <dir>/<16 hex digits of key>.nkc
  std::filesystem::path file_for(uint64_t key) const;

  // The entry for `key`, or nullopt when there is none or it was corrupt (then deleted).
  std::optional<CacheEntry> load(uint64_t key) const;
  // Atomically writes the entry. Throws ninfer::Error when the folder cannot be written.
  void store(uint64_t key, const CacheEntry& entry) const;

  // The bytes store() writes (exposed so tests can damage them deliberately).
  static std::string encode(uint64_t key, const CacheEntry& entry);
  // nullopt and a reason in `why` when `bytes` is not a valid file for `key`.
  static std::optional<CacheEntry> decode(uint64_t key, std::string_view bytes, std::string* why);

 private:
  std::filesystem::path dir_;
};

} // namespace ninfer::jit
