#include <gtest/gtest.h>

#include <string>

#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "ninfer/abi/ops/rope.h"
#include "ninfer/support/error.hpp"
#include "kv_blocks.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Layout {
  int32_t q_heads, k_heads, head_dim, rotary_dim;
  double theta;
  bool gated; // Qwen3.5's q_proj: per head [query | gate], q_head_stride = 2 * head_dim
  std::string describe() const {
    return std::to_string(q_heads) + "q+" + std::to_string(k_heads) + "k heads x " + std::to_string(head_dim) +
           " rotary " + std::to_string(rotary_dim) + (gated ? " gated" : "");
  }
};

// Qwen3 (full rotary), Qwen3.5 (25% rotary, gated q), and small odd shapes where the rotary
// pairs and the unrotated tail cut a row anywhere.
const Layout kLayouts[] = {
    {4, 2, 128, 128, 1e6, false}, {3, 1, 256, 64, 1e7, true}, {5, 3, 40, 12, 1e4, true}, {2, 2, 18, 18, 500.0, false}};

// Where the rows of one fused projection output lie: [q heads (| gates) | k heads | v | pad].
struct Buffer {
  int64_t q_head_stride, k_offset, token_stride;
  explicit Buffer(const Layout& l)
      : q_head_stride(l.gated ? 2 * l.head_dim : l.head_dim),
        k_offset(l.q_heads * q_head_stride),
        token_stride(k_offset + 2 * int64_t{l.k_heads} * l.head_dim + 3) {}
};

// The contract, in double: the head norm, its float32 rounding, then the rotation.
std::vector<double> oracle(const std::vector<float>& in, const Layout& l, const Buffer& b, int64_t T,
                           const std::vector<int32_t>& pos, const std::vector<float>& wq, const std::vector<float>& wk,
                           int32_t offset, float eps) {
  std::vector<double> want(in.begin(), in.end());
  const int half = l.rotary_dim / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int r = 0; r < l.q_heads + l.k_heads; ++r) {
      const bool is_q = r < l.q_heads;
      const int64_t at =
          t * b.token_stride + (is_q ? r * b.q_head_stride : b.k_offset + int64_t{r - l.q_heads} * l.head_dim);
      const std::vector<float>& w = is_q ? wq : wk;
      double ss = 0;
      for (int i = 0; i < l.head_dim; ++i) ss += double(in[at + i]) * in[at + i];
      const double inv = 1 / std::sqrt(ss / l.head_dim + eps);
      std::vector<double> y(l.head_dim);
      for (int i = 0; i < l.head_dim; ++i) y[i] = float(in[at + i] * inv * (offset + double(w[i])));
      for (int i = 0; i < l.head_dim; ++i) want[at + i] = y[i];
      for (int i = 0; i < half; ++i) {
        const double ang = pos[t] * std::pow(l.theta, -2.0 * i / l.rotary_dim);
        want[at + i] = y[i] * std::cos(ang) - y[i + half] * std::sin(ang);
        want[at + i + half] = y[i + half] * std::cos(ang) + y[i] * std::sin(ang);
      }
    }
  return want;
}

ninfer_head_norm_rope_args args(std::vector<float>& buf, const Layout& l, const Buffer& b, int64_t T,
                                const std::vector<int32_t>& pos, const std::vector<float>& wq,
                                const std::vector<float>& wk, int32_t offset, float eps) {
  return {buf.data(), b.token_stride, b.q_head_stride, buf.data() + b.k_offset, b.token_stride, l.head_dim,
          wq.data(), wk.data(), pos.data(), T, l.q_heads, l.k_heads,
          l.head_dim, l.rotary_dim, eps, offset, l.theta};
}

ninfer_shape shape(const Layout& l, int64_t T) {
  return {T, {l.head_dim, l.q_heads, l.k_heads, l.rotary_dim}, NINFER_DTYPE_F32};
}

std::vector<int32_t> positions(std::mt19937_64& rng, int64_t T) {
  std::uniform_int_distribution<int32_t> far(0, 262143);
  std::vector<int32_t> pos(T);
  for (auto& p : pos) p = far(rng);
  pos[0] = 0;
  return pos;
}

} // namespace

// Both norm forms on every layout, on the rows of a fused projection output at positions up to
// the longest context Qwen3.5 supports. Everything outside the q and k rows (gates, v, padding)
// must be exactly as it was.
TEST(HeadNormRopeOp, NormsThenRotatesQAndKHeadRows) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("head_norm_rope");
  const int64_t T = 7;
  const float eps = 1e-6f;
  for (const Layout& l : kLayouts)
    for (int32_t offset : {0, 1}) {
      const Buffer b(l);
      const auto before = randn(rng, T * b.token_stride, 2.f);
      auto wq = randn(rng, l.head_dim, 0.3f), wk = randn(rng, l.head_dim, 0.3f);
      if (!offset)
        for (auto* w : {&wq, &wk})
          for (auto& v : *w) v += 1.f;
      const auto pos = positions(rng, T);
      auto x = before;
      const ninfer_head_norm_rope_args a = args(x, l, b, T, pos, wq, wk, offset, eps);
      be.run(NINFER_OP_HEAD_NORM_ROPE, shape(l, T), &a);
      const auto want = oracle(before, l, b, T, pos, wq, wk, offset, eps);
      const Mismatch m = compare(x, want, kFloat32Exact);
      EXPECT_TRUE(m.ok) << l.describe() << " offset " << offset << ": " << m.describe();
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = t * b.token_stride;
        for (int h = 0; h < l.q_heads; ++h)
          for (int64_t i = l.head_dim; i < b.q_head_stride; ++i)
            ASSERT_EQ(x[row + h * b.q_head_stride + i], before[row + h * b.q_head_stride + i])
                << "gate of q head " << h;
        for (int64_t i = b.k_offset + int64_t{l.k_heads} * l.head_dim; i < b.token_stride; ++i)
          ASSERT_EQ(x[row + i], before[row + i]) << "v / padding column " << i;
      }
    }
}

// The fused op is the two ops it replaces: per-head rms_norm of q and of k, then rope. On the
// CPU plugin both run the same row functions, so the bits must be identical.
TEST(HeadNormRopeOp, EqualsRmsNormThenRopeBitForBit) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("head_norm_rope vs unfused");
  const int64_t T = 5;
  const float eps = 1e-6f;
  for (const Layout& l : kLayouts)
    for (int32_t offset : {0, 1}) {
      const Buffer b(l);
      const auto before = randn(rng, T * b.token_stride, 2.f);
      const auto wq = randn(rng, l.head_dim, 0.3f), wk = randn(rng, l.head_dim, 0.3f);
      const auto pos = positions(rng, T);
      auto fused = before, unfused = before;
      const ninfer_head_norm_rope_args a = args(fused, l, b, T, pos, wq, wk, offset, eps);
      be.run(NINFER_OP_HEAD_NORM_ROPE, shape(l, T), &a);

      float* q = unfused.data();
      float* k = unfused.data() + b.k_offset;
      ninfer_rms_norm_args nq{q, b.token_stride, b.q_head_stride, nullptr, 0, 0, wq.data(), q, b.token_stride,
                              b.q_head_stride, T, l.q_heads, l.head_dim, eps, offset};
      ninfer_rms_norm_args nk{k, b.token_stride, l.head_dim, nullptr, 0, 0, wk.data(), k, b.token_stride,
                              l.head_dim, T, l.k_heads, l.head_dim, eps, offset};
      be.run(NINFER_OP_RMS_NORM, {T, {l.head_dim, l.q_heads, 0, 0}, NINFER_DTYPE_F32}, &nq);
      be.run(NINFER_OP_RMS_NORM, {T, {l.head_dim, l.k_heads, 0, 0}, NINFER_DTYPE_F32}, &nk);
      ninfer_rope_args rq{q, b.token_stride, b.q_head_stride, pos.data(), T, l.q_heads, l.head_dim, l.rotary_dim,
                          l.theta};
      ninfer_rope_args rk{k, b.token_stride, l.head_dim, pos.data(), T, l.k_heads, l.head_dim, l.rotary_dim, l.theta};
      be.run(NINFER_OP_ROPE, {T, {l.head_dim, l.q_heads, l.rotary_dim, 0}, NINFER_DTYPE_F32}, &rq);
      be.run(NINFER_OP_ROPE, {T, {l.head_dim, l.k_heads, l.rotary_dim, 0}, NINFER_DTYPE_F32}, &rk);

      for (size_t i = 0; i < fused.size(); ++i)
        ASSERT_EQ(fused[i], unfused[i]) << l.describe() << " offset " << offset << " element " << i;
    }
}

// A rotary_dim that is zero, odd or beyond head_dim breaks the contract: no variant takes it
// (and model code would not run the fused op).
TEST(HeadNormRopeOp, RejectsRotaryDimsTheContractForbids) {
  Backend be = cpu_backend();
  for (int32_t rotary : {0, 7, 66}) {
    const ninfer_shape s{1, {64, 2, 1, rotary}, NINFER_DTYPE_F32};
    EXPECT_FALSE(be.has_variant(NINFER_OP_HEAD_NORM_ROPE, s)) << "rotary_dim " << rotary;
  }
  EXPECT_TRUE(be.has_variant(NINFER_OP_HEAD_NORM_ROPE, {1, {64, 2, 1, 64}, NINFER_DTYPE_F32}));
}

// head_norm_rope_append on a float32 cache: the q and k rows as the double oracle says, the
// rotated k rows and the untouched v rows of each token in its cache row (slot 1, positions
// from 3, through a shuffled block table of 2-token blocks with 3 blocks no slot owns), and
// nothing else in the cache. Arguments that break the contract's ties between the
// two halves (append.k not rope.k) are refused.
TEST(HeadNormRopeAppendOp, CachesTheOracleKRowsAndTheVRowsOnly) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("head_norm_rope_append");
  const int64_t T = 4;
  const int32_t slots = 2, capacity = 8, slot = 1, pos0 = 3;
  const float eps = 1e-6f, sentinel = 7.f;
  for (const Layout& l : kLayouts) {
    const Buffer b(l);
    const auto before = randn(rng, T * b.token_stride, 2.f);
    const auto wq = randn(rng, l.head_dim, 0.3f), wk = randn(rng, l.head_dim, 0.3f);
    std::vector<int32_t> pos(T), seq_start{0, static_cast<int32_t>(T)}, seq_slot{slot}, token_seq(T, 0);
    for (int64_t t = 0; t < T; ++t) pos[t] = pos0 + static_cast<int32_t>(t);
    const auto blocks = KvBlockLayout::shuffled(slots, capacity, /*block_tokens=*/2, /*spare=*/3, rng);
    const int64_t row = int64_t{l.k_heads} * l.head_dim, cache_elems = blocks.pool_rows() * row;
    std::vector<float> x = before, kc(cache_elems, sentinel), vc(cache_elems, sentinel);
    ninfer_head_norm_rope_append_args a{args(x, l, b, T, pos, wq, wk, 1, eps), {}};
    a.append = {x.data() + b.k_offset, b.token_stride, x.data() + b.k_offset + row, b.token_stride,
                blocks.cache(kc.data(), vc.data(), l.k_heads, l.head_dim, NINFER_DTYPE_F32),
                {1, seq_start.data(), seq_slot.data(), pos.data(), token_seq.data()}, T};
    const ninfer_shape s = shape(l, T);
    be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND, s, &a);

    const auto want = oracle(before, l, b, T, pos, wq, wk, 1, eps);
    const Mismatch m = compare(x, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << l.describe() << ": " << m.describe();
    std::vector<double> want_k(cache_elems, sentinel), want_v(cache_elems, sentinel);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < row; ++i) {
        const int64_t at = blocks.row(slot, pos[t]) * row + i;
        want_k[at] = want[t * b.token_stride + b.k_offset + i];
        want_v[at] = before[t * b.token_stride + b.k_offset + row + i];
      }
    const Mismatch mk = compare(kc, want_k, kFloat32Exact), mv = compare(vc, want_v, {"exact-copy", 0, 0});
    EXPECT_TRUE(mk.ok) << l.describe() << ", K cache: " << mk.describe();
    EXPECT_TRUE(mv.ok) << l.describe() << ", V cache: " << mv.describe();

    ninfer_head_norm_rope_append_args untied = a;
    untied.append.k = x.data() + b.k_offset + row; // the v rows, not the k rows the op rotated
    EXPECT_THROW(be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND, s, &untied), Error) << l.describe();
  }
}
