// silu_mul on the host (contract: ninfer/abi/ops/silu_mul.h): the SwiGLU activation,
// silu(gate) * up, in double, rounded once.
#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/silu_mul.h"
#include "common/numerics.hpp"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {

void silu_mul_row(const float* gate, const float* up, float* o, int64_t width) {
  for (int64_t i = 0; i < width; ++i) o[i] = static_cast<float>(silu(gate[i]) * up[i]);
}

namespace {

int32_t supports_width(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }

int32_t silu_mul(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_silu_mul_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const float* g = a.gate + t * a.gate_row_stride;
    const float* u = a.up + t * a.up_row_stride;
    silu_mul_row(g, u, a.out + t * a.out_row_stride, a.width);
  }
  return NINFER_OK;
}

} // namespace

int32_t register_silu_mul(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_SILU_MUL, "reference", kF32Only, supports_width, silu_mul);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
