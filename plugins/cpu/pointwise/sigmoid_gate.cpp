// sigmoid_gate on the host (contract: ninfer/abi/ops/sigmoid_gate.h): the Qwen3.5 attention
// output gate, x *= sigmoid(gate), in place, in double, rounded once.
#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/sigmoid_gate.h"
#include "common/numerics.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports_heads(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

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

int32_t register_sigmoid_gate(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_SIGMOID_GATE, "reference", kF32Only, supports_heads, sigmoid_gate);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
