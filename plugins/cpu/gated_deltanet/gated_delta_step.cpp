// gated_delta_step on the host (contract: ninfer/abi/ops/gated_delta_step.h): a Gated DeltaNet
// decode step after the conv (gating from the raw a and b projections, one delta-rule step, the
// gated output norm), running the code of the ops it fuses, so a model gets the bits of the
// unfused chain from the same inputs. A verification pass's tokens are walked in order.
#include <cstdint>

#include "common/cpu_ops.hpp"
#include "gated_deltanet/gated_delta_rule_common.hpp"
#include "gated_deltanet/gated_deltanet_math.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "common/parallel.hpp"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {
namespace {

// A decode step or a verification pass (a few tokens per sequence, walked in order); a prompt
// chunk runs the unfused ops, whose gated_delta_rule has the chunked form.
constexpr int32_t kMaxSeqTokens = 8;

int32_t step_supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[2] > 0 && s->dims[3] > 0 &&
         s->dims[0] % s->dims[3] == 0 && s->max_seq_tokens <= kMaxSeqTokens;
}

// Per worker: the recurrent form's double state and row; then g and beta of the call's tokens.
size_t per_worker_doubles(const ninfer_shape* s) { return static_cast<size_t>(s->dims[1] * s->dims[2] + s->dims[2]); }
size_t step_workspace(const void*, const ninfer_shape* s, int64_t tokens) {
  return sizeof(double) * per_worker_doubles(s) * static_cast<size_t>(thread_count()) +
         sizeof(float) * 2 * static_cast<size_t>(tokens * s->dims[0]);
}

int32_t gated_delta_step(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_gated_delta_step_args*>(args);
  const int32_t H = a.v_heads;
  if (a.k_heads <= 0 || H <= 0 || H % a.k_heads != 0)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "gated_delta_step/reference: v_heads %d is not a multiple of k_heads %d",
                H, a.k_heads);
  if (a.batch.num_seqs <= 0 || a.batch.seq_start[a.batch.num_seqs] != a.tokens)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_step/reference: %lld tokens, but the batch's %d sequences hold %d",
                static_cast<long long>(a.tokens), a.batch.num_seqs,
                a.batch.num_seqs > 0 ? a.batch.seq_start[a.batch.num_seqs] : 0);
  const ninfer_shape s{a.tokens, {H, a.k_dim, a.v_dim, a.k_heads}, NINFER_DTYPE_F32};
  if (!l->workspace || l->workspace_bytes < step_workspace(nullptr, &s, a.tokens))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "gated_delta_step/reference: workspace of %zu bytes, %zu needed",
                l->workspace_bytes, step_workspace(nullptr, &s, a.tokens));
  auto* ws = static_cast<double*>(l->workspace);
  const size_t slice = per_worker_doubles(&s);
  float* g = reinterpret_cast<float*>(ws + slice * thread_count());
  float* beta = g + a.tokens * H;
  for (int64_t t = 0; t < a.tokens; ++t)
    for (int32_t h = 0; h < H; ++h) {
      g[t * H + h] = gdn_log_decay(a.a[t * a.ab_token_stride + h], a.a_log[h], a.dt_bias[h]);
      beta[t * H + h] = gdn_beta(a.b[t * a.ab_token_stride + h]);
    }
  const ninfer_gated_delta_rule_args r{a.q,     a.k,     a.qk_token_stride, a.v,        a.v_token_stride,
                                       g,       beta,    a.state,           a.out,      a.out_token_stride,
                                       a.batch, a.tokens, a.k_heads,        H,          a.k_dim,
                                       a.v_dim, a.scale,  a.token_states};
  parallel_for_workers(static_cast<int64_t>(a.batch.num_seqs) * H, 1, [&](int64_t b, int64_t e, int w) {
    double* S = ws + slice * w;
    for (int64_t i = b; i < e; ++i) {
      const gdr::Head hd(r, static_cast<int32_t>(i / H), static_cast<int32_t>(i % H));
      gdr::run_recurrent_head(hd, S, S + static_cast<int64_t>(a.k_dim) * a.v_dim);
      for (int64_t t = hd.t0; t < hd.t1; ++t)
        gated_rms_norm_row(hd.out(t), a.z + t * a.z_token_stride + static_cast<int64_t>(hd.h) * a.v_dim, hd.out(t),
                           a.v_dim, a.norm_w, a.eps);
    }
  });
  return NINFER_OK;
}

} // namespace

int32_t register_gated_delta_step(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_GATED_DELTA_STEP, "reference", kF32Only, step_supports, gated_delta_step, step_workspace);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
