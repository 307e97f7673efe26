// conv_l2_norm on the host (contract: ninfer/abi/ops/conv_l2_norm.h): causal_conv1d's call, then
// l2_norm of the q and k heads, running the code of the ops it fuses, so a model gets the bits
// of the unfused chain from the same inputs.
#include <cstdint>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "common/row_math.hpp"
#include "gated_deltanet/gated_delta_rule_common.hpp"
#include "gated_deltanet/gated_deltanet_math.hpp"
#include "ninfer/abi/ops/conv_l2_norm.h"

namespace ninfer::cpu_plugin {
namespace {

int32_t conv_supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] >= 1 && s->dims[1] <= 16 && s->dims[3] > 0;
}

int32_t conv_l2_norm(const void*, const void* args, const ninfer_launch*, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_conv_l2_norm_args*>(args);
  const auto& c = a.conv;
  if (a.norm_heads < 0 || a.norm_dim <= 0 || static_cast<int64_t>(a.norm_heads) * a.norm_dim > c.channels)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "conv_l2_norm/reference: %d heads of %d channels exceed the %d channels", a.norm_heads, a.norm_dim,
                c.channels);
  if (int32_t rc = causal_conv1d_call(c, err, err_len); rc != NINFER_OK) return rc;
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int32_t h = 0; h < a.norm_heads; ++h)
      l2_norm_row(c.out + t * c.out_token_stride + static_cast<int64_t>(h) * a.norm_dim, a.norm_dim, a.eps);
  return NINFER_OK;
}

} // namespace

int32_t register_conv_l2_norm(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_CONV_L2_NORM, "reference", kF32Only, conv_supports, conv_l2_norm);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
