// gated_delta_rule, recurrent form: token by token, exactly the contract's four lines. Used for
// decode steps and speculative verification (it writes token states, NINFER_SHAPE_TOKEN_STATES),
// and the reference the chunked form is tested against. Each token's arithmetic is in double (a
// per-worker slice of the caller's workspace) from the float32 state a slot holds, and the state
// is rounded to float32 after every token: a call of n tokens computes what n one-token calls
// compute, so a speculative round verifies exactly what decode steps would have computed.
#include <cmath>

#include "common/cpu_ops.hpp"
#include "gated_deltanet/gated_delta_rule_common.hpp"
#include "common/host_variant.hpp"
#include "common/parallel.hpp"

namespace ninfer::cpu_plugin {
namespace {

size_t per_worker_doubles(const ninfer_shape* s) {
  const int64_t kd = s->dims[2], vd = s->dims[3];
  return static_cast<size_t>(kd * vd + vd);
}

size_t workspace_bytes(const void*, const ninfer_shape* s, int64_t) {
  return sizeof(double) * per_worker_doubles(s) * static_cast<size_t>(thread_count());
}

} // namespace

void gdr::run_recurrent_head(const gdr::Head& hd, double* S, double* u) {
  const auto& a = hd.a;
  const int32_t K = a.k_dim, V = a.v_dim;
  hd.load_state(S);
  for (int64_t t = hd.t0; t < hd.t1; ++t) {
    const float* q = hd.q(t);
    const float* k = hd.k(t);
    const float* v = hd.v(t);
    const double decay = std::exp(hd.g(t)), beta = hd.beta(t);
    for (int64_t i = 0; i < static_cast<int64_t>(K) * V; ++i) S[i] *= decay;
    // u = beta * (v - S^T k)
    for (int32_t j = 0; j < V; ++j) u[j] = 0;
    for (int32_t i = 0; i < K; ++i)
      for (int32_t j = 0; j < V; ++j) u[j] += S[i * V + j] * k[i];
    for (int32_t j = 0; j < V; ++j) u[j] = beta * (v[j] - u[j]);
    // S += k u^T; out = S^T (scale q)
    for (int32_t i = 0; i < K; ++i)
      for (int32_t j = 0; j < V; ++j) S[i * V + j] += static_cast<double>(k[i]) * u[j];
    float* out = hd.out(t);
    for (int32_t j = 0; j < V; ++j) u[j] = 0; // reuse u as the output accumulator
    for (int32_t i = 0; i < K; ++i) {
      const double qi = static_cast<double>(a.scale) * q[i];
      for (int32_t j = 0; j < V; ++j) u[j] += S[i * V + j] * qi;
    }
    for (int32_t j = 0; j < V; ++j) out[j] = static_cast<float>(u[j]);
    for (int64_t i = 0; i < static_cast<int64_t>(K) * V; ++i) S[i] = static_cast<float>(S[i]);
    hd.store_token_state(S, t);
  }
  hd.store_state(S);
}

namespace {

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_gated_delta_rule_args*>(args);
  if (!gdr::heads_ok(a))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "v_heads %d is not a multiple of k_heads %d",
                a.v_heads, a.k_heads);
  const ninfer_shape s{a.tokens, {1, a.v_heads, a.k_dim, a.v_dim}, NINFER_DTYPE_F32};
  if (!l->workspace || l->workspace_bytes < workspace_bytes(nullptr, &s, a.tokens))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "workspace of %zu bytes is smaller than the %zu needed",
                l->workspace_bytes, workspace_bytes(nullptr, &s, a.tokens));
  auto* ws = static_cast<double*>(l->workspace);
  const size_t slice = per_worker_doubles(&s);
  parallel_for_workers(static_cast<int64_t>(a.batch.num_seqs) * a.v_heads, 1, [&](int64_t b, int64_t e, int w) {
    double* S = ws + slice * w;
    for (int64_t i = b; i < e; ++i)
      gdr::run_recurrent_head(gdr::Head(a, static_cast<int32_t>(i / a.v_heads), static_cast<int32_t>(i % a.v_heads)), S,
               S + static_cast<int64_t>(a.k_dim) * a.v_dim);
  });
  return NINFER_OK;
}

} // namespace

const ninfer_variant& gated_delta_rule_recurrent_variant() {
  static const ninfer_variant v = host_variant(NINFER_OP_GATED_DELTA_RULE, "recurrent", kF32Only,
                                               gdr::supports_any, launch, workspace_bytes);
  return v;
}

} // namespace ninfer::cpu_plugin
