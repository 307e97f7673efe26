// gdn_gating on the host (contract: ninfer/abi/ops/gdn_gating.h). Dot products accumulate in
// double so this stays the reference GPU variants are compared with.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/cpu_ops.hpp"
#include "gated_deltanet/gated_deltanet_math.hpp"
#include "ninfer/abi/ops/gdn_gating.h"

namespace ninfer::cpu_plugin {
namespace {

double load(const void* base, int64_t i, int32_t dtype) {
  if (dtype == NINFER_DTYPE_F32) return static_cast<const float*>(base)[i];
  // bfloat16: the high half of a float32.
  const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

double softplus(double z) { return z > 20.0 ? z : std::log1p(std::exp(z)); }

int32_t supports(const void*, const ninfer_shape* s) {
  return (s->dtype == NINFER_DTYPE_F32 || s->dtype == NINFER_DTYPE_BF16) && s->dims[0] > 0 &&
         s->dims[1] > 0 && s->tokens > 0;
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_gdn_gating_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    for (int32_t h = 0; h < a.heads; ++h) {
      double av = 0, bv = 0;
      for (int32_t k = 0; k < a.hidden; ++k) {
        const double x = load(a.x, t * a.x_row_stride + k, a.dtype);
        av += x * load(a.w_a, static_cast<int64_t>(h) * a.hidden + k, a.dtype);
        bv += x * load(a.w_b, static_cast<int64_t>(h) * a.hidden + k, a.dtype);
      }
      a.g[t * a.heads + h] = gdn_log_decay(av, a.a_log[h], a.dt_bias[h]);
      a.beta[t * a.heads + h] = gdn_beta(bv);
    }
  }
  return NINFER_OK;
}

} // namespace

float gdn_log_decay(double a, float a_log, float dt_bias) {
  return static_cast<float>(-std::exp(static_cast<double>(a_log)) * softplus(a + dt_bias));
}

float gdn_beta(double b) { return static_cast<float>(1.0 / (1.0 + std::exp(-b))); }

int32_t register_gdn_gating(const ninfer_registrar* r) {
  static ninfer_variant v = [] {
    ninfer_variant x{};
    x.op = NINFER_OP_GDN_GATING;
    x.name = "reference";
    x.exec = NINFER_EXEC_HOST;
    x.geometry = NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE;
    x.cooperative = 0;
    x.split_k = 1;
    x.tokens_per_cta = 1;
    x.dtype_mask = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_BF16);
    x.supports = supports;
    x.launch = launch;
    return x;
  }();
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
