// kv_append and attention with a float16 or bfloat16 KV cache on the CUDA plugin, against the CPU
// reference plugin reading the same 16-bit cache (docs/cuda-attention.md, "16-bit KV cache").
//
// kv_append: both plugins round float32 rows to nearest even, so the caches must agree bit for
// bit. attention: the CPU reference widens the same 16-bit elements exactly and attends in
// double, so a float32 GPU kernel (split-KV decode, float32 prefill) differs from it only in
// summation order (kGpuVsCpuF32), and a tensor-core prefill by its q / P rounding (the row
// tolerances of attention_test.cpp). Every variant that serves a call and the planner's choice,
// on fresh random caches whose slots hold NaN after their filled length, with decode spans up
// to 5,000 keys (split-KV with chunks of the span), prompt chunks that start mid-sequence
// (chunked prefill reading the earlier chunks from the cache) and decode calls with several
// tokens per sequence (mixed steps' chunks, speculative verification). The cache is paged through a
// shuffled block table of 64-token blocks (the core's default) with NaN blocks no slot owns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attention_test_common.hpp"
#include "described_cards.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "op_routes.hpp"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/support/error.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// A 16-bit cache format: float -> bits (round to nearest even), and its NaN.
struct Format16 {
  const char* name;
  int32_t dtype;
  uint16_t nan;
  uint16_t (*encode)(float);
};

uint16_t encode_f16(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
uint16_t encode_bf16(float x) { return to_bf16(x); }

constexpr Format16 kF16{"float16", NINFER_DTYPE_F16, 0x7e00, encode_f16};
constexpr Format16 kBf16{"bfloat16", NINFER_DTYPE_BF16, 0x7fc0, encode_bf16};
constexpr Format16 kFormats[] = {kF16, kBf16};

constexpr int32_t kKvHeads = 2;
constexpr int32_t kCapacity = 5120;
constexpr int32_t kBlockTokens = 64, kSpareBlocks = 5;

// Slot s holds keys for positions [0, kFilled[s]); every call's sequences end at their slot's
// filled length, so a kernel that reads one key too far gets NaN.
constexpr int32_t kFilled[] = {1, 64, 65, 1001, 4097, 5000, 300, 13, 1200};

std::vector<Call> calls() {
  return {
      {"decode at position 0", {{0, 0, 1}}},
      {"decode at position 63", {{1, 63, 1}}},
      {"decode at position 64", {{2, 64, 1}}},
      {"decode at position 1000", {{3, 1000, 1}}},
      {"decode at position 4096", {{4, 4096, 1}}},
      {"decode at position 4999 (a 5000-key span)", {{5, 4999, 1}}},
      {"decode batch of 6 slots", {{5, 4999, 1}, {0, 0, 1}, {2, 64, 1}, {3, 1000, 1}, {1, 63, 1}, {4, 4096, 1}}},
      {"prompt of 13 tokens", {{7, 0, 13}}},
      {"prompt of 300 tokens", {{6, 0, 300}}},
      {"chunk of 40 tokens at position 961", {{3, 961, 40}}},
      {"chunk of 200 tokens at position 1000", {{8, 1000, 200}}},
      {"chunk of 904 tokens at position 4096", {{5, 4096, 904}}},
      {"mixed call of 245 tokens", {{8, 1000, 200}, {5, 4999, 1}, {7, 0, 13}, {3, 970, 31}}},
      // Several tokens of one sequence in a decode call share the tensor-core decode's rows
      // (attention/decode_runs.cuh), with the grid shared out anew over long spans.
      {"chunk of 20 tokens at position 4980", {{5, 4980, 20}}},
      {"chunk of 27 tokens beside 2 decodes", {{5, 4973, 27}, {3, 1000, 1}, {2, 64, 1}}},
      {"4 tokens of each of 3 sequences", {{5, 4996, 4}, {4, 4093, 4}, {3, 997, 4}}},
      {"3 tokens each at positions 62 and 1198", {{1, 61, 3}, {8, 1197, 3}}},
      // Past the float decode's 64 tokens: the hd128 class's tensor-core decode serves up to 128.
      {"chunk of 100 tokens at position 4900", {{5, 4900, 100}}},
      {"chunk of 128 tokens at position 3969", {{4, 3969, 128}}},
      {"chunk of 129 tokens at position 3968", {{4, 3968, 129}}},
  };
}

// Runs whose items outnumber the grid (attention/decode_runs.cuh): Qwen3-8B's 8 kv heads of 4
// query heads, where a chunk's runs of 4 tokens give 8 items each, against split counts that
// give each token as few as 2 CTAs (93 tokens: 192 items on 186 CTAs).
std::vector<Call> long_run_calls() {
  return {
      {"chunk of 93 tokens at position 4907", {{5, 4907, 93}}},
      {"chunk of 128 tokens at position 3969", {{4, 3969, 128}}},
      {"chunk of 90 tokens beside a chunk of 35 and 3 decodes",
       {{3, 911, 90}, {0, 0, 1}, {8, 1165, 35}, {5, 4999, 1}, {2, 64, 1}}},
      {"chunk of 71 tokens at position 229", {{6, 229, 71}}},
  };
}

// The largest call the split-KV decode serves on a 16-bit cache of this head dim
// (attention/shapes.hpp): 128 tokens where the hd128 class's tensor-core decode reads it, 64 else.
int64_t decode_token_limit(int32_t head_dim) { return head_dim > 64 && head_dim <= 128 ? 128 : 64; }

// The same paged 16-bit cache on both backends (a shuffled table, a copy of it on the GPU).
struct Cache16 {
  int32_t head_dim, kv_heads, slots, dtype;
  KvBlockLayout blocks;
  DeviceBuffer cpu_k, cpu_v, gpu_k, gpu_v, cpu_table, gpu_table;

  Cache16(Backend& cpu, Backend& gpu, const Format16& f, int32_t hd, std::mt19937_64& rng, int32_t kvh = kKvHeads)
      : head_dim(hd), kv_heads(kvh), slots(static_cast<int32_t>(std::size(kFilled))), dtype(f.dtype),
        blocks(KvBlockLayout::shuffled(slots, kCapacity, kBlockTokens, kSpareBlocks, rng)) {
    const size_t row = static_cast<size_t>(kvh) * hd;
    std::vector<uint16_t> k(size_t(blocks.pool_rows()) * row, f.nan), v = k;
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int32_t s = 0; s < slots; ++s)
      for (int32_t p = 0; p < kFilled[s]; ++p)
        for (size_t i = 0; i < row; ++i) {
          k[size_t(blocks.row(s, p)) * row + i] = f.encode(nd(rng));
          v[size_t(blocks.row(s, p)) * row + i] = f.encode(nd(rng));
        }
    cpu_k = put(cpu, k, "K cache");
    cpu_v = put(cpu, v, "V cache");
    gpu_k = put(gpu, k, "K cache");
    gpu_v = put(gpu, v, "V cache");
    cpu_table = put(cpu, blocks.table, "KV block table");
    gpu_table = put(gpu, blocks.table, "KV block table");
  }
  ninfer_kv_cache on(bool gpu) const {
    ninfer_kv_cache c{};
    c.k = (gpu ? gpu_k : cpu_k).data();
    c.v = (gpu ? gpu_v : cpu_v).data();
    c.kv_heads = kv_heads;
    c.head_dim = head_dim;
    c.dtype = dtype;
    blocks.attach(c, (gpu ? gpu_table : cpu_table).as<int32_t>());
    return c;
  }
};

struct Param {
  Format16 format;
  int32_t head_dim;
};

std::string param_name(const testing::TestParamInfo<Param>& p) {
  return std::string(p.param.format.name) + "_hd" + std::to_string(p.param.head_dim);
}

class GpuAttentionKv16 : public testing::TestWithParam<Param> {};

int failures() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

// One call on both backends: every variant that serves it and the planner's choice against the
// CPU reference; the split-KV decode must serve every call of up to decode_token_limit tokens,
// and no larger one. Returns whether the call added failures.
bool check_call(Backend& cpu, Backend& gpu, const Cache16& cache, const Format16& f, int32_t ratio,
                const Call& call, std::mt19937_64& rng) {
  const int32_t head_dim = cache.head_dim, kvh = cache.kv_heads, heads = kvh * ratio;
  const int64_t q_head_stride = ratio >= 6 ? 2 * head_dim : head_dim; // Qwen3.5's gated q rows
  const int64_t q_stride = heads * q_head_stride + 3, out_stride = int64_t{heads} * head_dim;
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  SCOPED_TRACE(testing::Message() << f.name << " cache, head_dim " << head_dim << ", " << heads << " heads / " << kvh
                                  << " kv heads, " << call.name);
  const int failures_before = failures();
  const Batch b(call.seqs);
  const int64_t T = b.tokens();
  const std::vector<float> q = randn(rng, T * q_stride);
  const ninfer_shape shape{T, {head_dim, heads, kvh, b.longest}, f.dtype};

  const BatchOn cb(cpu, b);
  DeviceBuffer cq = put(cpu, q), cout = poisoned_buffer(cpu, T * out_stride);
  const ninfer_attention_args ca{cq.as<float>(), q_stride, q_head_stride, cache.on(false), cb.batch,
                                 cout.as<float>(), out_stride, T, heads, scale};
  cpu.run(NINFER_OP_ATTENTION, shape, &ca);
  const std::vector<float> want = get<float>(cpu, cout, T * out_stride);
  if (std::any_of(want.begin(), want.end(), [](float x) { return std::isnan(x); })) {
    ADD_FAILURE() << "the CPU reference produced NaN: the test's cache or batch is wrong";
    return true;
  }

  const BatchOn gb(gpu, b);
  DeviceBuffer gq = put(gpu, q), gout = poisoned_buffer(gpu, T * out_stride);
  const ninfer_attention_args ga{gq.as<float>(), q_stride, q_head_stride, cache.on(true), gb.batch,
                                 gout.as<float>(), out_stride, T, heads, scale};
  auto check = [&](const std::string& what, const std::string& variant) {
    const std::vector<float> got = get<float>(gpu, gout, T * out_stride);
    // Tensor-core prefill and decode rows keep the float32 test's per-row bounds: the cache's rounding
    // happened before both sides read it (with an fp16 cache the kernel's own K/V rounding is
    // exact; bf16 cache values are exactly representable in fp16 within its range).
    if (mma_variant(variant)) {
      expect_mma_rows(got, widen(want), head_dim, heads, variant, what);
    } else if (const RowTolerance* tol = tensor_core_decode(variant, f.dtype)) {
      expect_rows_within(got, widen(want), head_dim, heads, *tol, what);
    } else {
      const Mismatch m = compare(got, widen(want), kGpuVsCpuF32);
      EXPECT_TRUE(m.ok) << what << ": " << m.describe();
    }
    gpu.upload(gout, 0, std::vector<float>(T * out_stride, std::numeric_limits<float>::quiet_NaN()).data(),
               sizeof(float) * T * out_stride);
  };

  const VariantRuns runs = run_variants_then_plan(gpu, NINFER_OP_ATTENTION, shape, &ga, check);
  EXPECT_GE(runs.ran, 1) << "no variant serves this shape";
  const int64_t limit = decode_token_limit(head_dim);
  if (T <= limit) EXPECT_GE(runs.cooperative, 1) << "no split-KV decode variant serves a call of " << T << " tokens";
  const Plan& plan = gpu.plan(NINFER_OP_ATTENTION, shape);
  if (T > limit) EXPECT_FALSE(plan.cooperative) << plan.variant << " planned for " << T << " tokens";
  if (T == 1 && b.longest >= 1000)
    EXPECT_GT(plan.v->split_k, kvh) << plan.variant << ": a long decode span should be cut into chunks";
  return failures() > failures_before;
}

TEST_P(GpuAttentionKv16, EveryVariantAndThePlannersChoiceMatchTheCpuReferenceOnTheSameCache) {
  NINFER_REQUIRE_CUDA_BACKEND();
  const Format16& f = GetParam().format;
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu attention 16-bit cache");
  const Cache16 cache(*cpu, *gpu, f, GetParam().head_dim, rng);
  int failing_calls = 0;
  for (int32_t ratio : {1, 4, 6, 8}) {
    if (ratio == 6 && cache.head_dim <= 128) continue; // Qwen3.5-27B's group: its head-dim class only
    for (const Call& call : calls())
      if (check_call(*cpu, *gpu, cache, f, ratio, call, rng) && ++failing_calls == 3) return;
  }
}

TEST(GpuAttentionKv16Runs, RunsThatOutnumberTheGridMatchTheCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu attention long runs");
  for (const Format16& f : kFormats) {
    const Cache16 cache(*cpu, *gpu, f, 128, rng, /*kvh=*/8);
    int failing_calls = 0;
    for (int32_t ratio : {4, 2})
      for (const Call& call : long_run_calls())
        if (check_call(*cpu, *gpu, cache, f, ratio, call, rng) && ++failing_calls == 3) return;
  }
}

// 128 and 256: Qwen's head dims (split-KV decode and tensor-core prefill with 16-byte vector
// loads); 64: the smallest class; 96 and 200: padded classes; 18 and 130: rows that are not
// 16-byte vectors (the element-wise loads; 130 those of the hd256 kernels).
INSTANTIATE_TEST_SUITE_P(GpuAttention, GpuAttentionKv16,
                         testing::Values(Param{kF16, 128}, Param{kF16, 256}, Param{kF16, 64}, Param{kF16, 96},
                                         Param{kF16, 18}, Param{kF16, 130}, Param{kBf16, 128}, Param{kBf16, 256},
                                         Param{kBf16, 18}, Param{kBf16, 200}),
                         param_name);

// kv_append into a 16-bit cache: the GPU's rounding is the CPU plugin's, bit for bit, including
// values past float16's range (infinity) and rows that are not 16-byte vectors; the rows go
// where a shuffled table of 8-token blocks says (the same on both), and the blocks no slot owns
// keep their canary bits.
TEST(GpuKvAppend16, RoundsToTheSameBitsAsTheCpuPlugin) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu kv_append 16-bit");
  constexpr uint16_t kCanary = 0x1234;
  for (const Format16& f : kFormats)
    for (int32_t head_dim : {128, 18}) {
      SCOPED_TRACE(testing::Message() << f.name << " cache, head_dim " << head_dim);
      const int32_t slots = 3, capacity = 40;
      const KvBlockLayout blocks = KvBlockLayout::shuffled(slots, capacity, /*block_tokens=*/8, /*spare=*/3, rng);
      const Batch b({{2, 0, 17}, {0, 5, 3}, {1, 39, 1}});
      const int64_t T = b.tokens(), row = int64_t{kKvHeads} * head_dim, stride = row + 3;
      std::vector<float> k = randn(rng, T * stride, 3.f), v = randn(rng, T * stride, 3.f);
      k[1] = 70000.f; // past float16's largest finite value: infinity there, finite in bfloat16
      v[2] = -1e-7f;  // a float16 subnormal
      const size_t elems = size_t(blocks.pool_rows()) * row;
      const std::vector<uint16_t> blank(elems, kCanary);
      auto run = [&](Backend& be) {
        DeviceBuffer kd = put(be, k), vd = put(be, v), kc = put(be, blank), vc = put(be, blank),
                     table = put(be, blocks.table);
        const BatchOn bo(be, b);
        ninfer_kv_cache cache{};
        cache.k = kc.data(), cache.v = vc.data(), cache.kv_heads = kKvHeads, cache.head_dim = head_dim;
        cache.dtype = f.dtype;
        blocks.attach(cache, table.as<int32_t>());
        ninfer_kv_append_args a{kd.as<float>(), stride, vd.as<float>(), stride, cache, bo.batch, T};
        be.run(NINFER_OP_KV_APPEND, {T, {head_dim, kKvHeads, 0, 0}, f.dtype}, &a);
        std::vector<uint16_t> out = get<uint16_t>(be, kc, elems), vo = get<uint16_t>(be, vc, elems);
        out.insert(out.end(), vo.begin(), vo.end());
        return out;
      };
      const std::vector<uint16_t> want = run(*cpu), got = run(*gpu);
      ASSERT_EQ(got.size(), want.size());
      size_t differ = 0, first = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i] && differ++ == 0) first = i;
      EXPECT_EQ(differ, 0u) << "first at element " << first << ": GPU 0x" << std::hex << got[first] << ", CPU 0x"
                            << want[first];
      // The test's own encoding of the written rows agrees too (both plugins round to nearest even),
      // at the contract's address of slot 2, position 0.
      EXPECT_EQ(want[size_t(blocks.row(2, 0)) * row + 1], f.encode(k[1]));
      const std::vector<bool> owned = blocks.owned();
      const size_t block_elems = size_t(blocks.block_tokens) * row;
      size_t touched = 0;
      for (int32_t blk = 0; blk < blocks.pool_blocks; ++blk)
        if (!owned[size_t(blk)])
          for (size_t i = 0; i < block_elems; ++i)
            touched += (got[blk * block_elems + i] != kCanary) + (got[elems + blk * block_elems + i] != kCanary);
      EXPECT_EQ(touched, 0u) << "kv_append wrote into blocks no slot owns";
    }
}

// Needs no GPU: every CUDA attention and kv_append variant of float caches declares all three
// cache dtypes (a variant of the compact formats alone, kv_append's rows_quantized, none), the
// planner gives a 16-bit decode a split-KV plan whose CTAs are all resident, the same split as a
// float32 one wherever the two kernels are equally resident (the hd128 class decodes a 16-bit
// cache on tensor cores with 74 KB of shared memory per CTA: two CTAs per SM like the float32
// kernel on the H100/H200's 228 KB, one on the 100 KB of sm_89 and sm_120 cards), and a cache
// dtype no variant reads is refused when planning, naming the op.
TEST(GpuAttentionKv16Plan, SixteenBitCachesPlanResidentSplitsAndUnknownDtypesAreRefused) {
  const std::vector<Card> cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "this build has no CUDA plugin for a described card";
  for (const Card& card : cards) {
    const LoadedPlugin* p = card.plugin;
    constexpr uint32_t kFloatCaches = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_F16) | (1u << NINFER_DTYPE_BF16);
    for (const char* op : {NINFER_OP_ATTENTION, NINFER_OP_KV_APPEND})
      for (const ninfer_variant* v : p->variants_for(op)) {
        if (!(v->dtype_mask & kFloatCaches)) continue; // a compact-format variant (kv_append.h)
        for (int32_t d : {NINFER_DTYPE_F32, NINFER_DTYPE_F16, NINFER_DTYPE_BF16})
          EXPECT_TRUE(v->dtype_mask & (1u << d)) << p->name() << " " << op << "/" << v->name << " lacks dtype " << d;
      }
    const Planner planner(*p, card.dev);
    for (int64_t T : {1, 8}) {
      const ninfer_shape f32{T, {128, 32, 8, 32768}, NINFER_DTYPE_F32};
      ninfer_shape f16 = f32, bf16 = f32;
      f16.dtype = NINFER_DTYPE_F16;
      bf16.dtype = NINFER_DTYPE_BF16;
      const Plan a = planner.plan(NINFER_OP_ATTENTION, f32), b = planner.plan(NINFER_OP_ATTENTION, f16),
                 c = planner.plan(NINFER_OP_ATTENTION, bf16);
      for (const Plan* x : {&b, &c}) {
        EXPECT_TRUE(x->cooperative) << card.dev.name << " T=" << T << ": " << x->variant;
        EXPECT_LE(T * x->v->split_k, x->residency) << card.dev.name << " T=" << T << ": " << x->variant;
        if (x->residency == a.residency) EXPECT_EQ(a.variant, x->variant) << card.dev.name << " T=" << T;
      }
      EXPECT_EQ(b.variant, c.variant) << card.dev.name << " T=" << T << ": float16 and bfloat16 plan alike";
    }
    // Qwen3-8B's prompt chunks at an 8K span: up to 128 tokens the tensor-core decode, wherever one
    // of its split counts holds all of the call's CTAs at once; 129 and more the prefill kernel.
    for (const int64_t T : {65, 96, 128, 129, 200})
      for (const int32_t dtype : {NINFER_DTYPE_F16, NINFER_DTYPE_BF16}) {
        const ninfer_shape s{T, {128, 32, 8, 8192}, dtype};
        bool fits = false;
        for (const ninfer_variant* v : p->variants_for(NINFER_OP_ATTENTION))
          if (v->cooperative && v->supports(v->ctx, &s))
            fits |= T * v->split_k <= occupancy(v->resources, v->dynamic_smem_bytes(v->ctx, &s), card.dev).residency;
        if (T > 128) EXPECT_FALSE(fits) << card.dev.name << " T=" << T << ": a decode variant serves past 128 tokens";
        EXPECT_EQ(planner.plan(NINFER_OP_ATTENTION, s).cooperative, fits) << card.dev.name << " T=" << T;
        // sm_90 cards (114 SMs and more, two of these CTAs per SM) hold 96 tokens on two splits.
        if (T == 96 && card.dev.cc_major == 9)
          EXPECT_TRUE(fits) << card.dev.name << ": no decode split holds the call";
      }
    try {
      planner.plan(NINFER_OP_ATTENTION, {1, {128, 32, 8, 4096}, NINFER_DTYPE_INT4}); // a weight format
      ADD_FAILURE() << card.dev.name << ": a cache of dtype int4 was planned";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention"), std::string::npos) << e.what();
    }
  }
}

} // namespace
