// Building blocks shared by the CPU plugin's op families: a host variant descriptor and the
// error message a launch returns.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin {

inline constexpr uint32_t kF32Only = 1u << NINFER_DTYPE_F32;
inline constexpr uint32_t kF32OrBf16 = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_BF16);
// The weights linear and norm_linear take: float32, bfloat16 and the quantized dtypes
// (ninfer/abi/ops/quant_weight.h). Their emulate_bf16_x variants stay kF32OrBf16: they emulate
// a cuBLASLt route, which takes no quantized weights.
inline constexpr uint32_t kLinearWeightDtypes = kF32OrBf16 | (1u << NINFER_DTYPE_INT4) | (1u << NINFER_DTYPE_INT8) |
                                                (1u << NINFER_DTYPE_FP8_E4M3);
// The KV cache element types kv_append writes and attention reads.
inline constexpr uint32_t kKvCacheDtypes = kF32OrBf16 | (1u << NINFER_DTYPE_F16);
// With the compact formats (kv_append.h) too.
inline constexpr uint32_t kKvCacheDtypesAll =
    kKvCacheDtypes | (1u << NINFER_DTYPE_KV_INT8) | (1u << NINFER_DTYPE_KV_FP8) | (1u << NINFER_DTYPE_KV_INT4R);

// A host variant: one launch covers the whole call (the planner gives host variants a single
// launch over [0, T)), so sequential ops see whole sequences.
inline ninfer_variant host_variant(const char* op, const char* name, uint32_t dtype_mask,
                                   int32_t (*supports)(const void*, const ninfer_shape*),
                                   int32_t (*launch)(const void*, const void*, const ninfer_launch*, void*, char*, size_t),
                                   size_t (*workspace_bytes)(const void*, const ninfer_shape*, int64_t) = nullptr) {
  ninfer_variant v{};
  v.op = op;
  v.name = name;
  v.exec = NINFER_EXEC_HOST;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE;
  v.cooperative = 0;
  v.split_k = 1;
  v.tokens_per_cta = 1;
  v.dtype_mask = dtype_mask;
  v.supports = supports;
  v.launch = launch;
  v.workspace_bytes = workspace_bytes;
  return v;
}

// Writes a printf-style message to the launch's error buffer and returns `status`.
[[gnu::format(printf, 4, 5)]] inline int32_t fail(int32_t status, char* err, size_t err_len, const char* fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return status;
}

} // namespace ninfer::cpu_plugin
