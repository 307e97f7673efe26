// gated_delta_rule, chunked form: 64 tokens at a time. Used for prefill.
//
// Within a chunk, with G_i the cumulative log decay from the chunk start to token i and S the
// state before the chunk, unrolling the recurrence gives
//   u_i   = beta_i (v_i - e^{G_i} S^T k_i) - sum_{j<i} beta_i e^{G_i - G_j} (k_i.k_j) u_j
//   out_i = e^{G_i} S^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i.k_j) u_j
//   S'    = e^{G_last} S + sum_j e^{G_last - G_j} k_j u_j^T
// The first line is a unit lower-triangular system (the UT transform of DeltaNet), solved by
// forward substitution; the rest are matrix products. It is the same math as the recurrent
// form evaluated in another order, which is what the agreement test relies on. All of it in
// double, in a per-worker slice of the caller's workspace.
#include <algorithm>
#include <cmath>

#include "common/cpu_ops.hpp"
#include "gated_deltanet/gated_delta_rule_common.hpp"
#include "common/host_variant.hpp"
#include "common/parallel.hpp"

namespace ninfer::cpu_plugin {
namespace {

constexpr int64_t kChunk = 64;

struct Scratch {
  double *S, *kc, *qc, *u, *o, *G;
  static size_t doubles(int64_t K, int64_t V) { return K * V + 2 * kChunk * K + 2 * kChunk * V + kChunk; }
  Scratch(double* p, int64_t K, int64_t V) {
    S = p;
    kc = S + K * V;
    qc = kc + kChunk * K;
    u = qc + kChunk * K;
    o = u + kChunk * V;
    G = o + kChunk * V;
  }
};

// The chunked form pays off only for sequences of several tokens; decode steps (one token per
// sequence) plan to the recurrent variant, and so do calls that keep every token's state (it
// never holds the state between two tokens of a chunk).
int32_t supports(const void*, const ninfer_shape* s) {
  return gdr::supports_any(nullptr, s) && s->dims[0] >= 2 && !(s->flags & NINFER_SHAPE_TOKEN_STATES);
}

size_t workspace_bytes(const void*, const ninfer_shape* s, int64_t) {
  return sizeof(double) * Scratch::doubles(s->dims[2], s->dims[3]) * static_cast<size_t>(thread_count());
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void run_chunk(const gdr::Head& hd, const Scratch& w, int64_t c0, int64_t L) {
  const auto& a = hd.a;
  const int64_t K = a.k_dim, V = a.v_dim;
  double g_sum = 0;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t t = c0 + i;
    g_sum += hd.g(t);
    w.G[i] = g_sum;
    const float* k = hd.k(t);
    const float* q = hd.q(t);
    for (int64_t d = 0; d < K; ++d) {
      w.kc[i * K + d] = k[d];
      w.qc[i * K + d] = static_cast<double>(a.scale) * q[d];
    }
  }
  // u_i = beta_i (v_i - e^{G_i} S^T k_i), o_i = e^{G_i} S^T q_i
  for (int64_t i = 0; i < L; ++i) {
    double* u = w.u + i * V;
    double* o = w.o + i * V;
    std::fill(u, u + V, 0.0);
    std::fill(o, o + V, 0.0);
    for (int64_t d = 0; d < K; ++d) {
      const double kd = w.kc[i * K + d], qd = w.qc[i * K + d];
      const double* Srow = w.S + d * V;
      for (int64_t j = 0; j < V; ++j) {
        u[j] += Srow[j] * kd;
        o[j] += Srow[j] * qd;
      }
    }
    const double e = std::exp(w.G[i]), beta = hd.beta(c0 + i);
    const float* v = hd.v(c0 + i);
    for (int64_t j = 0; j < V; ++j) {
      u[j] = beta * (v[j] - e * u[j]);
      o[j] *= e;
    }
  }
  // Forward substitution through the intra-chunk delta corrections, then the intra-chunk reads.
  for (int64_t i = 0; i < L; ++i) {
    double* u = w.u + i * V;
    const double beta = hd.beta(c0 + i);
    for (int64_t j = 0; j < i; ++j) {
      const double c = beta * std::exp(w.G[i] - w.G[j]) * dot(w.kc + i * K, w.kc + j * K, K);
      const double* uj = w.u + j * V;
      for (int64_t d = 0; d < V; ++d) u[d] -= c * uj[d];
    }
    double* o = w.o + i * V;
    for (int64_t j = 0; j <= i; ++j) {
      const double c = std::exp(w.G[i] - w.G[j]) * dot(w.qc + i * K, w.kc + j * K, K);
      const double* uj = w.u + j * V;
      for (int64_t d = 0; d < V; ++d) o[d] += c * uj[d];
    }
    float* out = hd.out(c0 + i);
    for (int64_t d = 0; d < V; ++d) out[d] = static_cast<float>(o[d]);
  }
  // S' = e^{G_last} S + sum_j e^{G_last - G_j} k_j u_j^T
  const double last = w.G[L - 1];
  const double e_last = std::exp(last);
  for (int64_t i = 0; i < K * V; ++i) w.S[i] *= e_last;
  for (int64_t j = 0; j < L; ++j) {
    const double c = std::exp(last - w.G[j]);
    const double* uj = w.u + j * V;
    for (int64_t d = 0; d < K; ++d) {
      const double kd = c * w.kc[j * K + d];
      double* Srow = w.S + d * V;
      for (int64_t e = 0; e < V; ++e) Srow[e] += kd * uj[e];
    }
  }
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_gated_delta_rule_args*>(args);
  if (!gdr::heads_ok(a))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "v_heads %d is not a multiple of k_heads %d",
                a.v_heads, a.k_heads);
  const ninfer_shape s{a.tokens, {2, a.v_heads, a.k_dim, a.v_dim}, NINFER_DTYPE_F32};
  if (!l->workspace || l->workspace_bytes < workspace_bytes(nullptr, &s, a.tokens))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "workspace of %zu bytes is smaller than the %zu needed",
                l->workspace_bytes, workspace_bytes(nullptr, &s, a.tokens));
  const size_t slice = Scratch::doubles(a.k_dim, a.v_dim);
  parallel_for_workers(static_cast<int64_t>(a.batch.num_seqs) * a.v_heads, 1, [&](int64_t b, int64_t e, int wk) {
    const Scratch w(static_cast<double*>(l->workspace) + slice * wk, a.k_dim, a.v_dim);
    for (int64_t i = b; i < e; ++i) {
      const gdr::Head hd(a, static_cast<int32_t>(i / a.v_heads), static_cast<int32_t>(i % a.v_heads));
      hd.load_state(w.S);
      for (int64_t c0 = hd.t0; c0 < hd.t1; c0 += kChunk) run_chunk(hd, w, c0, std::min(kChunk, hd.t1 - c0));
      hd.store_state(w.S);
    }
  });
  return NINFER_OK;
}

} // namespace

const ninfer_variant& gated_delta_rule_chunked_variant() {
  static const ninfer_variant v = host_variant(NINFER_OP_GATED_DELTA_RULE, "chunked64", kF32Only, supports, launch,
                                               workspace_bytes);
  return v;
}

} // namespace ninfer::cpu_plugin
