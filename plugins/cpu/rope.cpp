// rope on the host (contract: ninfer/abi/ops/rope.h). Angles in double: at position 262,144 a
// float32 angle would already be off by ~0.01 rad.
#include <cmath>

#include "cpu_ops.hpp"
#include "host_variant.hpp"
#include "ninfer/abi/ops/rope.h"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const ninfer_shape* s) {
  const int64_t head_dim = s->dims[0], rotary = s->dims[2];
  return s->tokens > 0 && head_dim > 0 && s->dims[1] > 0 && rotary > 0 && rotary % 2 == 0 && rotary <= head_dim;
}

int32_t launch(const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_rope_args*>(args);
  if (a.rotary_dim <= 0 || a.rotary_dim % 2 || a.rotary_dim > a.head_dim)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "rotary_dim %d must be even and in (0, head_dim=%d]",
                a.rotary_dim, a.head_dim);
  const int32_t half = a.rotary_dim / 2;
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const double p = a.positions[t];
    for (int32_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(a.theta, -2.0 * i / a.rotary_dim);
      const double c = std::cos(p * inv_freq), s = std::sin(p * inv_freq);
      for (int32_t h = 0; h < a.heads; ++h) {
        float* x = a.x + t * a.token_stride + h * a.head_stride;
        const double x1 = x[i], x2 = x[i + half];
        x[i] = static_cast<float>(x1 * c - x2 * s);
        x[i + half] = static_cast<float>(x2 * c + x1 * s);
      }
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_rope(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_ROPE, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
