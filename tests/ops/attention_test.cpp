#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/support/error.hpp"
#include "kv_blocks.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Dims {
  int32_t slots = 3, capacity = 40, kv_heads = 2, head_dim = 16, heads = 6;
};

// The test's own model of a cache element type, written from the formats' definitions rather
// than from the plugin's code: x rounded to `bits` significant bits (round half to even, the
// default floating-point rounding mode of nearbyint), with a fixed quantum below the smallest
// normal exponent (subnormals) and infinity past the largest finite value.
struct CacheFormat {
  const char* name;
  int32_t dtype;
  int bits, min_exponent; // significant bits incl. the leading one; exponent of the smallest normal
  double max_finite;
  size_t bytes;

  double round(double x) const {
    if (dtype == NINFER_DTYPE_F32) return static_cast<float>(x);
    if (x == 0 || !std::isfinite(x)) return x;
    int e;
    std::frexp(x, &e); // |x| = m 2^e, m in [0.5, 1): the leading bit's exponent is e - 1
    const double quantum = std::ldexp(1.0, std::max(e - 1, min_exponent) - bits + 1);
    const double r = std::nearbyint(x / quantum) * quantum;
    return std::fabs(r) > max_finite ? std::copysign(INFINITY, r) : r;
  }
  // The value of element i of a cache buffer, decoded from its bits.
  double decode(const void* base, int64_t i) const {
    if (dtype == NINFER_DTYPE_F32) return static_cast<const float*>(base)[i];
    const uint16_t b = static_cast<const uint16_t*>(base)[i];
    if (dtype == NINFER_DTYPE_BF16) { // the high half of a float32
      const uint32_t w = uint32_t{b} << 16;
      float f;
      std::memcpy(&f, &w, sizeof f);
      return f;
    }
    const int sign = b >> 15, exp = (b >> 10) & 31, frac = b & 1023; // IEEE binary16
    const double mag = exp == 31 ? (frac ? NAN : INFINITY)
                       : exp == 0 ? std::ldexp(frac, -24)
                                  : std::ldexp(1024 + frac, exp - 25);
    return sign ? -mag : mag;
  }
};

constexpr CacheFormat kF32Cache{"float32", NINFER_DTYPE_F32, 24, -126, 3.4028234663852886e38, 4};
constexpr CacheFormat kF16Cache{"float16", NINFER_DTYPE_F16, 11, -14, 65504.0, 2};
constexpr CacheFormat kBf16Cache{"bfloat16", NINFER_DTYPE_BF16, 8, -126, 3.3895313892515355e38, 2};

// A paged cache of `fmt` elements, NaN-poisoned (F16/BF16: the all-ones bit pattern is a NaN
// too): a pool of layout.pool_blocks blocks through layout's table.
struct HostCache {
  KvBlockLayout layout;
  std::vector<uint8_t> k, v;
  ninfer_kv_cache desc{};
  size_t row_bytes = 0;
  HostCache(const Dims& d, const CacheFormat& fmt, KvBlockLayout l) : layout(std::move(l)) {
    row_bytes = size_t(d.kv_heads) * d.head_dim * fmt.bytes;
    k.assign(size_t(layout.pool_rows()) * row_bytes, 0xff);
    v = k;
    desc = layout.cache(k.data(), v.data(), d.kv_heads, d.head_dim, fmt.dtype);
  }
  // Bytes of blocks no slot owns that are no longer the poison: a write outside the table.
  int64_t canaries_touched() const {
    const std::vector<bool> owned = layout.owned();
    const size_t block_bytes = row_bytes * size_t(layout.block_tokens);
    int64_t n = 0;
    for (int32_t b = 0; b < layout.pool_blocks; ++b)
      if (!owned[size_t(b)])
        for (size_t i = 0; i < block_bytes; ++i) n += (k[b * block_bytes + i] != 0xff) + (v[b * block_bytes + i] != 0xff);
    return n;
  }
};

// The keys and values each slot has seen so far, rounded to the cache's format, in double, as
// the oracle's cache.
struct History {
  std::vector<std::vector<std::vector<double>>> k, v; // [slot][pos] -> [kv_heads * head_dim]
};

// Appends one call's tokens, then attends; checks both the cache rows and the outputs.
void run_call(Backend& be, const Dims& d, const CacheFormat& fmt, const HostCache& hc, History& hist,
              const TokenBatch& tb, std::mt19937_64& rng, const char* what) {
  const ninfer_kv_cache& cache = hc.desc;
  const int64_t T = tb.tokens();
  const int64_t kv_row = int64_t{d.kv_heads} * d.head_dim;
  const int64_t q_stride = int64_t{d.heads} * d.head_dim + 5, kv_stride = kv_row + 3;
  auto q = randn(rng, T * q_stride), k = randn(rng, T * kv_stride), v = randn(rng, T * kv_stride);
  const ninfer_token_batch batch = tb.batch();

  ninfer_kv_append_args ap{k.data(), kv_stride, v.data(), kv_stride, cache, batch, T};
  ninfer_shape append_shape{T, {d.head_dim, d.kv_heads, 0, 0}, fmt.dtype};
  append_shape.kv_block_tokens = cache.block_tokens;
  be.run(NINFER_OP_KV_APPEND, append_shape, &ap);
  EXPECT_EQ(hc.canaries_touched(), 0) << what << ": kv_append wrote into blocks no slot owns";
  int32_t longest = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t slot = tb.seq_slot[tb.token_seq[t]], pos = tb.token_pos[t];
    longest = std::max(longest, pos + 1);
    auto& ks = hist.k[slot];
    auto& vs = hist.v[slot];
    ASSERT_EQ(static_cast<int32_t>(ks.size()), pos) << "test batches append in order";
    ks.emplace_back();
    vs.emplace_back();
    const int64_t at = hc.layout.row(slot, pos) * kv_row; // the contract's address, not the plugin's
    for (int64_t i = 0; i < kv_row; ++i) {
      ks.back().push_back(fmt.round(k[t * kv_stride + i]));
      vs.back().push_back(fmt.round(v[t * kv_stride + i]));
      ASSERT_EQ(fmt.decode(cache.k, at + i), ks.back()[i]) << what << ": K cache element " << i;
      ASSERT_EQ(fmt.decode(cache.v, at + i), vs.back()[i]) << what << ": V cache element " << i;
    }
  }

  // Every slot's rows, through the contract's address rule: the ones its sequence wrote hold its
  // history, the others are still poison (no call wrote into another sequence's rows).
  for (int32_t slot = 0; slot < d.slots; ++slot)
    for (int32_t pos = 0; pos < hc.layout.capacity(); ++pos) {
      const int64_t at = hc.layout.row(slot, pos) * kv_row;
      const bool written = pos < static_cast<int32_t>(hist.k[slot].size());
      for (int64_t i = 0; i < kv_row; ++i) {
        const double kx = fmt.decode(cache.k, at + i), vx = fmt.decode(cache.v, at + i);
        if (written) {
          ASSERT_EQ(kx, hist.k[slot][pos][i]) << what << ": slot " << slot << " position " << pos << " K changed";
          ASSERT_EQ(vx, hist.v[slot][pos][i]) << what << ": slot " << slot << " position " << pos << " V changed";
        } else {
          ASSERT_TRUE(std::isnan(kx) && std::isnan(vx)) << what << ": slot " << slot << " position " << pos
                                                        << " was written by another sequence's call";
        }
      }
    }

  const float scale = 1.f / std::sqrt(float(d.head_dim));
  const int64_t out_stride = int64_t{d.heads} * d.head_dim + 2;
  auto out = poisoned(T * out_stride);
  ninfer_attention_args at{q.data(), q_stride, d.head_dim, cache, batch, out.data(), out_stride, T, d.heads, scale};
  ninfer_shape attn_shape{T, {d.head_dim, d.heads, d.kv_heads, longest}, fmt.dtype};
  attn_shape.kv_block_tokens = cache.block_tokens;
  be.run(NINFER_OP_ATTENTION, attn_shape, &at);

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
// then a batched decode over both, with a float32, float16 and bfloat16 cache, laid out as the
// identity block table and as a shuffled one (each slot's blocks in random pool order, with
// blocks no slot owns). The cache starts NaN-poisoned, so reading any position a token may not
// see (later positions, other slots, unowned blocks) turns its output into NaN. kv_append must
// store exactly the rounded values where the table says (checked against the contract's own
// address rule) and nowhere else (the unowned blocks keep their poison), and attention must
// read them as they are: the oracle attends over a contiguous copy of K and V rounded the same
// way, in double.
struct AttentionCase {
  CacheFormat fmt;
  bool shuffled;
  int32_t block_tokens;
};

class AttentionOp : public testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionOp, CausalGqaOverTheCacheAcrossPrefillAndDecode) {
  Backend be = cpu_backend();
  const CacheFormat& fmt = GetParam().fmt;
  const int32_t bt = GetParam().block_tokens;
  auto rng = fresh_rng((std::string("attention ") + fmt.name).c_str());
  Dims d;
  const HostCache cache(d, fmt,
                        GetParam().shuffled ? KvBlockLayout::shuffled(d.slots, d.capacity, bt, /*spare=*/7, rng)
                                            : KvBlockLayout::identity(d.slots, d.capacity, bt));
  History hist;
  hist.k.resize(d.slots);
  hist.v.resize(d.slots);

  TokenBatch prefill;
  prefill.add(2, 0, 12);
  run_call(be, d, fmt, cache, hist, prefill, rng, "prefill");

  TokenBatch mixed;
  mixed.add(2, 12, 1);
  mixed.add(0, 0, 5);
  run_call(be, d, fmt, cache, hist, mixed, rng, "mixed");

  for (int step = 0; step < 3; ++step) {
    TokenBatch decode;
    decode.add(0, 5 + step, 1);
    decode.add(2, 13 + step, 1);
    run_call(be, d, fmt, cache, hist, decode, rng, "decode");
  }
}

INSTANTIATE_TEST_SUITE_P(
    CacheDtypes, AttentionOp,
    testing::Values(AttentionCase{kF32Cache, false, 64}, AttentionCase{kF16Cache, false, 64},
                    AttentionCase{kBf16Cache, false, 64}, AttentionCase{kF32Cache, true, 4},
                    AttentionCase{kF16Cache, true, 4}, AttentionCase{kBf16Cache, true, 8},
                    AttentionCase{kF32Cache, true, 1}),
    [](const testing::TestParamInfo<AttentionCase>& p) {
      return std::string(p.param.fmt.name) + (p.param.shuffled ? "_shuffled_blocks_of_" : "_identity_blocks_of_") +
             std::to_string(p.param.block_tokens);
    });

// A table entry outside the pool, a block size that is not a power of two and a capacity that is
// not blocks_per_slot x block_tokens are refused, and nothing is written.
TEST(KvAppendOp, RejectsATableEntryOutsideThePoolAndABadLayout) {
  Backend be = cpu_backend();
  auto l = KvBlockLayout::identity(2, 8, 4); // 2 slots x 2 blocks
  std::vector<float> kc(size_t(l.pool_rows()) * 8, -7.f), vc(kc), k(8, 1.f), v(8, 1.f);
  TokenBatch tb;
  tb.add(1, 5, 1);
  const auto run = [&](const ninfer_kv_cache& c) {
    ninfer_kv_append_args a{k.data(), 8, v.data(), 8, c, tb.batch(), 1};
    be.run(NINFER_OP_KV_APPEND, {1, {8, 1, 0, 0}, NINFER_DTYPE_F32}, &a);
  };
  l.table[3] = l.pool_blocks; // slot 1's second block: one past the pool
  EXPECT_THROW(run(l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32)), Error);
  l.table[3] = -1;
  EXPECT_THROW(run(l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32)), Error);
  l.table[3] = 3;
  ninfer_kv_cache c = l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32);
  c.block_tokens = 3, c.blocks_per_slot = 3, c.capacity = 9; // not a power of two
  EXPECT_THROW(run(c), Error);
  c = l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32);
  c.capacity = 7;
  EXPECT_THROW(run(c), Error);
  for (float x : kc) ASSERT_EQ(x, -7.f) << "a refused call wrote the cache";
  run(l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32)); // and the valid table writes slot 1's block 3
  EXPECT_EQ(kc[size_t(l.row(1, 5)) * 8], 1.f);
}

// attention refuses a row whose blocks the table does not name in the pool.
TEST(AttentionOp, RejectsAReadThroughATableEntryOutsideThePool) {
  Backend be = cpu_backend();
  auto l = KvBlockLayout::identity(1, 8, 4);
  std::vector<float> kc(size_t(l.pool_rows()) * 8, 0.5f), vc(kc), q(8, 1.f), out(8);
  l.table[0] = -1; // position 5 reads block 0 too
  TokenBatch tb;
  tb.add(0, 5, 1);
  ninfer_attention_args a{q.data(), 8, 8, l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32), tb.batch(),
                          out.data(), 8, 1, 1, 0.35f};
  EXPECT_THROW(be.run(NINFER_OP_ATTENTION, {1, {8, 1, 1, 6}, NINFER_DTYPE_F32}, &a), Error);
}

// The edges of the 16-bit formats: ties round to even, float16 overflows to infinity past
// 65504 (65519 still rounds down to it), subnormals keep their quantum, NaN stays NaN.
TEST(KvAppendOp, SixteenBitCachesRoundToNearestEvenWithTheFormatsRange) {
  Backend be = cpu_backend();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {1.f + 1.f / 2048, 1.f + 3.f / 2048, 1.f + 1.f / 256, 1.f + 3.f / 256, 65519.f,
                                65520.f, -1e6f, 3e-6f, 1e-8f, nan, 0.1f, -0.f, 1e38f, -3.4e38f, 7.f, 1e-40f};
  const int32_t hd = static_cast<int32_t>(x.size());
  for (const CacheFormat& fmt : {kF16Cache, kBf16Cache}) {
    std::vector<uint16_t> kc(hd, 0), vc(hd, 0);
    const auto l = KvBlockLayout::identity(1, 1, 1);
    ninfer_kv_cache cache = l.cache(kc.data(), vc.data(), 1, hd, fmt.dtype);
    TokenBatch tb;
    tb.add(0, 0, 1);
    ninfer_kv_append_args a{x.data(), hd, x.data(), hd, cache, tb.batch(), 1};
    be.run(NINFER_OP_KV_APPEND, {1, {hd, 1, 0, 0}, fmt.dtype}, &a);
    for (int32_t i = 0; i < hd; ++i) {
      const double got = fmt.decode(kc.data(), i), want = fmt.round(x[i]);
      if (std::isnan(x[i])) EXPECT_TRUE(std::isnan(got)) << fmt.name << ": NaN became " << got;
      else EXPECT_EQ(got, want) << fmt.name << ": " << x[i];
    }
  }
  // The oracle's own edges, from the formats' definitions.
  EXPECT_EQ(kF16Cache.round(1.0 + 1.0 / 2048), 1.0);              // a tie rounds to the even neighbour
  EXPECT_EQ(kF16Cache.round(1.0 + 3.0 / 2048), 1.0 + 2.0 / 1024); // and up when that one is even
  EXPECT_EQ(kF16Cache.round(65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(kF16Cache.round(65520.0)));
  EXPECT_EQ(kBf16Cache.round(1.0 + 1.0 / 256), 1.0);
}

TEST(KvAppendOp, RejectsAPositionPastTheCapacity) {
  Backend be = cpu_backend();
  std::vector<float> kc(2 * 4 * 8), vc(kc.size()), k(8), v(8);
  const auto l = KvBlockLayout::identity(2, 4, 4);
  ninfer_kv_cache cache = l.cache(kc.data(), vc.data(), 1, 8, NINFER_DTYPE_F32);
  TokenBatch tb;
  tb.add(1, 4, 1);
  ninfer_kv_append_args a{k.data(), 8, v.data(), 8, cache, tb.batch(), 1};
  EXPECT_THROW(be.run(NINFER_OP_KV_APPEND, {1, {8, 1, 0, 0}, NINFER_DTYPE_F32}, &a), Error);
}
