#include <gtest/gtest.h>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/error.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Dims {
  int32_t slots = 3, capacity = 40, kv_heads = 2, head_dim = 16, heads = 6;
};

// The keys and values each slot has seen so far, in double, as the oracle's cache.
struct History {
  std::vector<std::vector<std::vector<double>>> k, v; // [slot][pos] -> [kv_heads * head_dim]
};

// Appends one call's tokens, then attends; checks both the cache rows and the outputs.
void run_call(Backend& be, const Dims& d, ninfer_kv_cache& cache, History& hist, const TokenBatch& tb,
              std::mt19937_64& rng, const char* what) {
  const int64_t T = tb.tokens();
  const int64_t kv_row = int64_t{d.kv_heads} * d.head_dim;
  const int64_t q_stride = int64_t{d.heads} * d.head_dim + 5, kv_stride = kv_row + 3;
  auto q = randn(rng, T * q_stride), k = randn(rng, T * kv_stride), v = randn(rng, T * kv_stride);
  const ninfer_token_batch batch = tb.batch();

  ninfer_kv_append_args ap{k.data(), kv_stride, v.data(), kv_stride, cache, batch, T};
  be.run(NINFER_OP_KV_APPEND, {T, {d.head_dim, d.kv_heads, 0, 0}, NINFER_DTYPE_F32}, &ap);
  int32_t longest = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t slot = tb.seq_slot[tb.token_seq[t]], pos = tb.token_pos[t];
    longest = std::max(longest, pos + 1);
    auto& ks = hist.k[slot];
    auto& vs = hist.v[slot];
    ASSERT_EQ(static_cast<int32_t>(ks.size()), pos) << "test batches append in order";
    ks.emplace_back(k.begin() + t * kv_stride, k.begin() + t * kv_stride + kv_row);
    vs.emplace_back(v.begin() + t * kv_stride, v.begin() + t * kv_stride + kv_row);
    const float* crow = cache.k + (int64_t{slot} * d.capacity + pos) * kv_row;
    for (int64_t i = 0; i < kv_row; ++i) ASSERT_EQ(crow[i], k[t * kv_stride + i]) << what << ": cache row";
  }

  const float scale = 1.f / std::sqrt(float(d.head_dim));
  const int64_t out_stride = int64_t{d.heads} * d.head_dim + 2;
  auto out = poisoned(T * out_stride);
  ninfer_attention_args at{q.data(), q_stride, d.head_dim, cache, batch, out.data(), out_stride, T, d.heads, scale};
  be.run(NINFER_OP_ATTENTION, {T, {d.head_dim, d.heads, d.kv_heads, longest}, NINFER_DTYPE_F32}, &at);

  std::vector<float> got;
  std::vector<double> want;
  const int group = d.heads / d.kv_heads;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t slot = tb.seq_slot[tb.token_seq[t]], pos = tb.token_pos[t];
    for (int h = 0; h < d.heads; ++h) {
      const int g = h / group;
      std::vector<double> s(pos + 1);
      double mx = -1e300;
      for (int j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int i = 0; i < d.head_dim; ++i)
          dot += double(q[t * q_stride + h * d.head_dim + i]) * hist.k[slot][j][g * d.head_dim + i];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (auto& e : s) z += (e = std::exp(e - mx));
      for (int i = 0; i < d.head_dim; ++i) {
        double o = 0;
        for (int j = 0; j <= pos; ++j) o += s[j] / z * hist.v[slot][j][g * d.head_dim + i];
        want.push_back(o);
        got.push_back(out[t * out_stride + h * d.head_dim + i]);
      }
    }
  }
  const Mismatch m = compare(got, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << what << ": " << m.describe();
}

} // namespace

// A prefill chunk, then a mixed call (one sequence decoding, another starting its prompt),
// then a batched decode over both. The cache starts NaN-poisoned, so reading any position a
// token may not see (later positions, other slots) turns its output into NaN.
TEST(AttentionOp, CausalGqaOverTheCacheAcrossPrefillAndDecode) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("attention");
  Dims d;
  const size_t cache_elems = size_t(d.slots) * d.capacity * d.kv_heads * d.head_dim;
  std::vector<float> kc = poisoned(cache_elems), vc = poisoned(cache_elems);
  ninfer_kv_cache cache{kc.data(), vc.data(), d.slots, d.capacity, d.kv_heads, d.head_dim, NINFER_DTYPE_F32};
  History hist;
  hist.k.resize(d.slots);
  hist.v.resize(d.slots);

  TokenBatch prefill;
  prefill.add(2, 0, 12);
  run_call(be, d, cache, hist, prefill, rng, "prefill");

  TokenBatch mixed;
  mixed.add(2, 12, 1);
  mixed.add(0, 0, 5);
  run_call(be, d, cache, hist, mixed, rng, "mixed");

  for (int step = 0; step < 3; ++step) {
    TokenBatch decode;
    decode.add(0, 5 + step, 1);
    decode.add(2, 13 + step, 1);
    run_call(be, d, cache, hist, decode, rng, "decode");
  }
}

TEST(KvAppendOp, RejectsAPositionPastTheCapacity) {
  Backend be = cpu_backend();
  std::vector<float> kc(2 * 4 * 8), vc(kc.size()), k(8), v(8);
  ninfer_kv_cache cache{kc.data(), vc.data(), 2, 4, 1, 8, NINFER_DTYPE_F32};
  TokenBatch tb;
  tb.add(1, 4, 1);
  ninfer_kv_append_args a{k.data(), 8, v.data(), 8, cache, tb.batch(), 1};
  EXPECT_THROW(be.run(NINFER_OP_KV_APPEND, {1, {8, 1, 0, 0}, NINFER_DTYPE_F32}, &a), Error);
}
