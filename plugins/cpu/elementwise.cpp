// The elementwise gates on the host: silu_mul (SwiGLU) and sigmoid_gate (Qwen3.5 attention
// output gate). Contracts in ninfer/abi/ops/.
#include <initializer_list>

#include "cpu_ops.hpp"
#include "host_variant.hpp"
#include "ninfer/abi/ops/sigmoid_gate.h"
#include "ninfer/abi/ops/silu_mul.h"
#include "numerics.hpp"
#include "row_math.hpp"

namespace ninfer::cpu_plugin {

void silu_mul_row(const float* gate, const float* up, float* o, int64_t width) {
  for (int64_t i = 0; i < width; ++i) o[i] = static_cast<float>(silu(gate[i]) * up[i]);
}

namespace {

int32_t supports_width(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }
int32_t supports_heads(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

int32_t silu_mul(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_silu_mul_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const float* g = a.gate + t * a.gate_row_stride;
    const float* u = a.up + t * a.up_row_stride;
    silu_mul_row(g, u, a.out + t * a.out_row_stride, a.width);
  }
  return NINFER_OK;
}

int32_t sigmoid_gate(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_sigmoid_gate_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    for (int32_t h = 0; h < a.heads; ++h) {
      float* x = a.x + t * a.x_token_stride + static_cast<int64_t>(h) * a.head_dim;
      const float* g = a.gate + t * a.gate_token_stride + h * a.gate_head_stride;
      for (int32_t d = 0; d < a.head_dim; ++d) x[d] = static_cast<float>(x[d] * sigmoid(g[d]));
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_elementwise(const ninfer_registrar* r) {
  static const ninfer_variant sm = host_variant(NINFER_OP_SILU_MUL, "reference", kF32Only, supports_width, silu_mul);
  static const ninfer_variant sg =
      host_variant(NINFER_OP_SIGMOID_GATE, "reference", kF32Only, supports_heads, sigmoid_gate);
  for (const ninfer_variant* v : {&sm, &sg})
    if (int32_t rc = r->add_variant(r->ctx, v); rc != NINFER_OK) return rc;
  return NINFER_OK;
}

} // namespace ninfer::cpu_plugin
