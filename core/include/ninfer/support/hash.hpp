// 64-bit FNV-1a: a small hash whose value is the same on every compiler and standard library
// (std::hash is not), for seeds derived from names and for cache keys.
#pragma once

#include <cstdint>
#include <string_view>

namespace ninfer {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// FNV-1a of `data`, continuing from `h` (chain calls to hash several fields).
inline uint64_t fnv1a64(std::string_view data, uint64_t h = kFnvOffset) {
  for (unsigned char c : data) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

} // namespace ninfer
