// What the two host forms of gated_delta_rule (contract: ninfer/abi/ops/gated_delta_rule.h)
// share: shape checks, the row addressing of one (sequence, value head), and moving the
// float32 state in and out of the double-precision working copy.
#pragma once

#include <cstdint>

#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin::gdr {

inline int32_t supports_any(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[2] > 0 && s->dims[3] > 0;
}

inline bool heads_ok(const ninfer_gated_delta_rule_args& a) {
  return a.k_heads > 0 && a.v_heads > 0 && a.v_heads % a.k_heads == 0;
}

// Addresses of one (sequence, value head) problem.
struct Head {
  const ninfer_gated_delta_rule_args& a;
  int32_t seq, h, kh;
  int32_t t0, t1;
  float* state; // [k_dim, v_dim]

  Head(const ninfer_gated_delta_rule_args& args, int32_t s, int32_t head)
      : a(args), seq(s), h(head), kh(head / (args.v_heads / args.k_heads)), t0(args.batch.seq_start[s]),
        t1(args.batch.seq_start[s + 1]),
        state(args.state + (static_cast<int64_t>(args.batch.seq_slot[s]) * args.v_heads + head) *
                               static_cast<int64_t>(args.k_dim) * args.v_dim) {}

  const float* q(int64_t t) const { return a.q + t * a.qk_token_stride + static_cast<int64_t>(kh) * a.k_dim; }
  const float* k(int64_t t) const { return a.k + t * a.qk_token_stride + static_cast<int64_t>(kh) * a.k_dim; }
  const float* v(int64_t t) const { return a.v + t * a.v_token_stride + static_cast<int64_t>(h) * a.v_dim; }
  double g(int64_t t) const { return a.g[t * a.v_heads + h]; }
  double beta(int64_t t) const { return a.beta[t * a.v_heads + h]; }
  float* out(int64_t t) const { return a.out + t * a.out_token_stride + static_cast<int64_t>(h) * a.v_dim; }

  void load_state(double* S) const {
    const int64_t n = static_cast<int64_t>(a.k_dim) * a.v_dim;
    for (int64_t i = 0; i < n; ++i) S[i] = state[i];
  }
  void store_state(const double* S) const { store(S, state); }
  // The state after token t, when the call keeps every token's (a.token_states).
  void store_token_state(const double* S, int64_t t) const {
    if (a.token_states)
      store(S, a.token_states + (t * a.v_heads + h) * static_cast<int64_t>(a.k_dim) * a.v_dim);
  }

 private:
  void store(const double* S, float* to) const {
    const int64_t n = static_cast<int64_t>(a.k_dim) * a.v_dim;
    for (int64_t i = 0; i < n; ++i) to[i] = static_cast<float>(S[i]);
  }
};

// The recurrent form for one (sequence, value head): its tokens in order, the state carried in
// S (k_dim x v_dim doubles), u a v_dim scratch row (gated_deltanet/gated_delta_rule_recurrent.cpp).
void run_recurrent_head(const Head& hd, double* S, double* u);

} // namespace ninfer::cpu_plugin::gdr
