// fill_random on the host (contract: ninfer/abi/ops/fill_random.h): the reference the CUDA
// variants must match bit for bit.
#include <algorithm>
#include <cstring>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/fill_random.h"

namespace ninfer::cpu_plugin {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Round to nearest even; NaN stays NaN (the fill never makes one).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0; }

bool is_code_dtype(int32_t d) {
  return d == NINFER_DTYPE_INT4 || d == NINFER_DTYPE_INT8 || d == NINFER_DTYPE_FP8_E4M3;
}

constexpr uint32_t kFillDtypes = kF32OrBf16 | (1u << NINFER_DTYPE_INT4) | (1u << NINFER_DTYPE_INT8) |
                                 (1u << NINFER_DTYPE_FP8_E4M3);

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_fill_random_args*>(args);
  if (a.dtype != NINFER_DTYPE_F32 && a.dtype != NINFER_DTYPE_BF16 && !is_code_dtype(a.dtype))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "fill_random/reference: dtype must be F32, BF16, INT4, INT8 or FP8_E4M3");
  const int64_t begin = l->token_begin * NINFER_FILL_RANDOM_ROW;
  const int64_t end = std::min<int64_t>(a.count, l->token_end * NINFER_FILL_RANDOM_ROW);
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t h = mix64(a.seed ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull));
    if (is_code_dtype(a.dtype)) {
      const auto byte = static_cast<uint8_t>(h >> 56);
      static_cast<uint8_t*>(a.out)[i] = a.dtype == NINFER_DTYPE_FP8_E4M3 ? byte & 0xBFu : byte;
      continue;
    }
    const float u = static_cast<float>(h >> 40) * 0x1.0p-23f - 1.0f;
    const float v = a.offset + a.scale * u;
    if (a.dtype == NINFER_DTYPE_F32)
      static_cast<float*>(a.out)[i] = v;
    else
      static_cast<uint16_t*>(a.out)[i] = to_bf16(v);
  }
  return NINFER_OK;
}

} // namespace

int32_t register_fill_random(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_FILL_RANDOM, "reference", kFillDtypes, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
