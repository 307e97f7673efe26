// head_norm_rope on the host (contract: ninfer/abi/ops/head_norm_rope.h): rms_norm's row
// function then rope's, per head row, so the result is bit for bit that of the two ops.
#include <vector>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {

int32_t head_norm_rope_supports(const void*, const ninfer_shape* s) {
  const int64_t head_dim = s->dims[0], q_heads = s->dims[1], k_heads = s->dims[2], rotary = s->dims[3];
  return s->tokens > 0 && head_dim > 0 && q_heads >= 0 && k_heads >= 0 && q_heads + k_heads > 0 && rotary > 0 &&
         rotary % 2 == 0 && rotary <= head_dim;
}

int32_t head_norm_rope_launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_head_norm_rope_args*>(args);
  if (a.rotary_dim <= 0 || a.rotary_dim % 2 || a.rotary_dim > a.head_dim)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "rotary_dim %d must be even and in (0, head_dim=%d]",
                a.rotary_dim, a.head_dim);
  const double offset = a.weight_offset ? 1.0 : 0.0;
  const int32_t half = a.rotary_dim / 2;
  std::vector<double> c(half), s(half);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    rope_angles(a.positions[t], a.theta, a.rotary_dim, c.data(), s.data());
    for (int32_t h = 0; h < a.q_heads; ++h) {
      float* row = a.q + t * a.q_token_stride + h * a.q_head_stride;
      rms_norm_row(row, row, a.head_dim, a.q_weight, offset, a.eps);
      rope_rotate_row(row, half, c.data(), s.data());
    }
    for (int32_t h = 0; h < a.k_heads; ++h) {
      float* row = a.k + t * a.k_token_stride + h * a.k_head_stride;
      rms_norm_row(row, row, a.head_dim, a.k_weight, offset, a.eps);
      rope_rotate_row(row, half, c.data(), s.data());
    }
  }
  return NINFER_OK;
}

int32_t register_head_norm_rope(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_HEAD_NORM_ROPE, "reference", kF32Only, head_norm_rope_supports, head_norm_rope_launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
