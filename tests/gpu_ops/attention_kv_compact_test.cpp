// attention over a compact KV cache (KV_INT8, KV_FP8, KV_INT4R; kv_append.h) on the CUDA plugin,
// against the CPU reference plugin reading the same cache bytes: the CPU's kv_append writes the
// cache, and its codes and scales are copied to the device unchanged, so both sides attend over
// the same dequantized values (attention.h). Every variant that declares the format and serves
// the call runs, then the planner's choice: decode steps whose spans cross 64-token blocks and
// the split-KV chunk boundaries (up to 4,100 keys), decode batches, prompts from position 0, and
// chunks that start mid-sequence, with GQA groups of 1, 4 and 8, and 6 at head_dim 256
// (Qwen3.5-27B's 24 / 4; 6 and 8 with Qwen3.5's gated q rows), paged through a shuffled block
// table with blocks no slot owns. Rows a slot has not written have NaN scales, so a kernel that
// reads one key too far yields NaN. The variants that do not read compact caches (the
// tensor-core prefill, the fused decode op) refuse them, and the planner routes a compact cache's
// calls to the ones that do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_common.hpp"
#include "described_cards.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "op_routes.hpp"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/planning/planner.hpp"
#include "ninfer/support/error.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// The GPU kernels widen the same codes and scales to the same float32 values as the CPU
// reference (exactly for int8 and int4r, one float32 product for fp8 on both sides), then attend
// in float32 where the reference attends in double; int4r's query is rotated in float32 there
// and in double here. So only summation order and the rotation's rounding differ: the float32
// cache's tolerance.
constexpr Tolerance kCompactKvVsCpu{"gpu-compact-kv-vs-cpu-reference", 1e-4, 1e-4};

constexpr int32_t kKvHeads = 2;
constexpr int32_t kCapacity = 4160;
constexpr int32_t kBlockTokens = 64, kSpareBlocks = 5;

// Slot s holds keys for positions [0, kFilled[s]); every call's sequences end at their slot's
// filled length. The calls are smaller than the 16-bit test's: the CPU reference dequantizes
// every key row for every query row, and the suite runs within one device call.
constexpr int32_t kFilled[] = {1, 64, 65, 1001, 2047, 300, 13, 1200, 4100};

std::vector<Call> calls() {
  return {
      {"decode at position 0", {{0, 0, 1}}},
      {"decode at position 63", {{1, 63, 1}}},
      {"decode at position 64", {{2, 64, 1}}},
      {"decode at position 1000", {{3, 1000, 1}}},
      {"decode at position 2046 (a 2047-key span)", {{4, 2046, 1}}},
      {"decode at position 4099 (a 4100-key span: one chunk of 16-17 tiles per warp up to 32 chunks)", {{8, 4099, 1}}},
      {"decode batch of 5 slots", {{4, 2046, 1}, {0, 0, 1}, {2, 64, 1}, {3, 1000, 1}, {1, 63, 1}}},
      {"decode batch of the 3 longest spans", {{8, 4099, 1}, {4, 2046, 1}, {7, 1199, 1}}},
      {"prompt of 13 tokens", {{6, 0, 13}}},
      {"prompt of 300 tokens", {{5, 0, 300}}},
      {"chunk of 40 tokens at position 961", {{3, 961, 40}}},
      {"chunk of 200 tokens at position 1000", {{7, 1000, 200}}},
      {"chunk of 64 tokens at position 1983", {{4, 1983, 64}}},
      {"mixed call of 85 tokens", {{7, 1160, 40}, {4, 2046, 1}, {6, 0, 13}, {3, 970, 31}}},
  };
}

// K and V rows for the cache: normal elements, each row scaled by 10^u (u uniform in [-0.5,
// 0.3]: a group's scale differs from row to row), every fifth row with one channel 6x (the
// outlier int4r's rotation spreads).
std::vector<float> cache_rows(std::mt19937_64& rng, int64_t rows, int32_t hd) {
  std::vector<float> x = randn(rng, static_cast<size_t>(rows * hd));
  std::uniform_real_distribution<double> decade(-0.5, 0.3);
  std::uniform_int_distribution<int32_t> chan(0, hd - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const auto m = static_cast<float>(std::pow(10.0, decade(rng)));
    for (int32_t d = 0; d < hd; ++d) x[r * hd + d] *= m;
    if (r % 5 == 2) x[r * hd + chan(rng)] *= 6.f;
  }
  return x;
}

// A compact cache written by the CPU plugin's kv_append, and a copy of its bytes on the GPU.
struct CompactCache {
  int32_t dtype, head_dim;
  KvBlockLayout blocks;
  size_t code_bytes = 0, scale_bytes = 0;
  DeviceBuffer cpu_k, cpu_v, cpu_ks, cpu_vs, cpu_table, gpu_k, gpu_v, gpu_ks, gpu_vs, gpu_table;

  CompactCache(Backend& cpu, Backend& gpu, int32_t dt, int32_t hd, std::mt19937_64& rng)
      : dtype(dt), head_dim(hd),
        blocks(KvBlockLayout::shuffled(static_cast<int32_t>(std::size(kFilled)), kCapacity, kBlockTokens,
                                       kSpareBlocks, rng)) {
    const int64_t rows = blocks.pool_rows() * kKvHeads;
    code_bytes = static_cast<size_t>(rows * ninfer_kv_row_bytes(dtype, hd));
    scale_bytes = static_cast<size_t>(rows * ninfer_kv_row_scale_bytes(dtype, hd));
    // Unwritten rows: zero codes, NaN scales (all-ones bytes: NaN in fp16 and in float32).
    cpu_k = put(cpu, std::vector<uint8_t>(code_bytes, 0), "K codes");
    cpu_v = put(cpu, std::vector<uint8_t>(code_bytes, 0), "V codes");
    cpu_ks = put(cpu, std::vector<uint8_t>(scale_bytes, 0xff), "K scales");
    cpu_vs = put(cpu, std::vector<uint8_t>(scale_bytes, 0xff), "V scales");
    cpu_table = put(cpu, blocks.table, "KV block table");

    std::vector<Seq> fill;
    for (int32_t s = 0; s < blocks.slots; ++s) fill.push_back({s, 0, kFilled[s]});
    const Batch b(fill);
    const int64_t T = b.tokens(), row = int64_t{kKvHeads} * hd;
    const BatchOn bo(cpu, b);
    DeviceBuffer k = put(cpu, cache_rows(rng, T * kKvHeads, hd)), v = put(cpu, cache_rows(rng, T * kKvHeads, hd));
    const ninfer_kv_append_args a{k.as<float>(), row, v.as<float>(), row, on(false), bo.batch, T};
    ninfer_shape shape{T, {hd, kKvHeads, 0, 0}, dtype};
    shape.kv_block_tokens = kBlockTokens;
    cpu.run(NINFER_OP_KV_APPEND, shape, &a);

    gpu_k = put(gpu, get<uint8_t>(cpu, cpu_k, code_bytes), "K codes");
    gpu_v = put(gpu, get<uint8_t>(cpu, cpu_v, code_bytes), "V codes");
    gpu_ks = put(gpu, get<uint8_t>(cpu, cpu_ks, scale_bytes), "K scales");
    gpu_vs = put(gpu, get<uint8_t>(cpu, cpu_vs, scale_bytes), "V scales");
    gpu_table = put(gpu, blocks.table, "KV block table");
  }
  ninfer_kv_cache on(bool gpu) const {
    ninfer_kv_cache c = blocks.cache((gpu ? gpu_k : cpu_k).data(), (gpu ? gpu_v : cpu_v).data(), kKvHeads, head_dim,
                                     dtype);
    c.k_scale = (gpu ? gpu_ks : cpu_ks).data();
    c.v_scale = (gpu ? gpu_vs : cpu_vs).data();
    blocks.attach(c, (gpu ? gpu_table : cpu_table).as<int32_t>());
    return c;
  }
};

struct Param {
  const char* name;
  int32_t dtype;
  int32_t head_dim;
};

std::string param_name(const testing::TestParamInfo<Param>& p) {
  return std::string(p.param.name) + "_hd" + std::to_string(p.param.head_dim);
}

int failures() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

bool is_prefill_variant(const std::string& name) { return name.rfind("prefill_", 0) == 0; }

class GpuAttentionKvCompact : public testing::TestWithParam<Param> {};

TEST_P(GpuAttentionKvCompact, EveryVariantAndThePlannersChoiceMatchTheCpuReferenceOnTheSameCacheBytes) {
  NINFER_REQUIRE_CUDA_BACKEND();
  const Param& p = GetParam();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng((std::string("gpu attention compact cache ") + p.name).c_str());
  const CompactCache cache(*cpu, *gpu, p.dtype, p.head_dim, rng);
  const int32_t head_dim = p.head_dim;
  int failing_calls = 0;
  for (int32_t ratio : {1, 4, 6, 8}) {
    // 6: Qwen3.5-27B's group, in its head-dim class only (the key-owning decode's passes of 6
    // rows); the others keep the suite's time.
    if (ratio == 6 && head_dim <= 128) continue;
    const int32_t heads = kKvHeads * ratio;
    const int64_t q_head_stride = ratio >= 6 ? 2 * head_dim : head_dim; // Qwen3.5's gated q rows
    const int64_t q_stride = heads * q_head_stride + 3, out_stride = int64_t{heads} * head_dim;
    const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
    for (const Call& call : calls()) {
      SCOPED_TRACE(testing::Message() << p.name << " cache, head_dim " << head_dim << ", " << heads << " heads / "
                                      << kKvHeads << " kv heads, " << call.name);
      const int failures_before = failures();
      const Batch b(call.seqs);
      const int64_t T = b.tokens();
      const std::vector<float> q = randn(rng, T * q_stride);
      ninfer_shape shape{T, {head_dim, heads, kKvHeads, b.longest}, p.dtype};
      shape.kv_block_tokens = kBlockTokens;

      const BatchOn cb(*cpu, b);
      DeviceBuffer cq = put(*cpu, q), cout = poisoned_buffer(*cpu, T * out_stride);
      const ninfer_attention_args ca{cq.as<float>(), q_stride, q_head_stride, cache.on(false), cb.batch,
                                     cout.as<float>(), out_stride, T, heads, scale};
      cpu->run(NINFER_OP_ATTENTION, shape, &ca);
      const std::vector<float> want = get<float>(*cpu, cout, T * out_stride);
      ASSERT_TRUE(std::none_of(want.begin(), want.end(), [](float x) { return std::isnan(x); }))
          << "the CPU reference produced NaN: the test's cache or batch is wrong";

      const BatchOn gb(*gpu, b);
      DeviceBuffer gq = put(*gpu, q), gout = poisoned_buffer(*gpu, T * out_stride);
      const ninfer_attention_args ga{gq.as<float>(), q_stride, q_head_stride, cache.on(true), gb.batch,
                                     gout.as<float>(), out_stride, T, heads, scale};
      int prefill_runs = 0;
      auto check = [&](const std::string& what, const std::string& variant) {
        const std::vector<float> got = get<float>(*gpu, gout, T * out_stride);
        const Mismatch m = compare(got, widen(want), kCompactKvVsCpu);
        EXPECT_TRUE(m.ok) << what << ": " << m.describe();
        EXPECT_FALSE(mma_variant(variant)) << what << ": a tensor-core variant ran over a compact cache";
        prefill_runs += is_prefill_variant(variant);
        gpu->upload(gout, 0, std::vector<float>(T * out_stride, std::numeric_limits<float>::quiet_NaN()).data(),
                    sizeof(float) * T * out_stride);
      };

      const VariantRuns runs = run_variants_then_plan(*gpu, NINFER_OP_ATTENTION, shape, &ga, check);
      EXPECT_GE(runs.ran, 1) << "no variant serves this shape";
      EXPECT_GE(prefill_runs, 1) << "no prefill variant read the " << p.name << " cache";
      if (T <= 64) EXPECT_GE(runs.cooperative, 1) << "no split-KV decode variant serves a call of " << T << " tokens";
      const Plan& plan = gpu->plan(NINFER_OP_ATTENTION, shape);
      if (T == 1 && b.longest >= 1000)
        EXPECT_GT(plan.v->split_k, kKvHeads) << plan.variant << ": a long decode span should be cut into chunks";
      if (failures() > failures_before && ++failing_calls == 3) return;
    }
  }
}

// 64, 128, 256: the head-dim classes at their full width (int4r's only head dims here); int8 192
// and fp8 96: rows that fill only part of their class (zero past head_dim in the tiles).
INSTANTIATE_TEST_SUITE_P(GpuAttention, GpuAttentionKvCompact,
                         testing::Values(Param{"kv_int8", NINFER_DTYPE_KV_INT8, 64},
                                         Param{"kv_int8", NINFER_DTYPE_KV_INT8, 128},
                                         Param{"kv_int8", NINFER_DTYPE_KV_INT8, 256},
                                         Param{"kv_int8", NINFER_DTYPE_KV_INT8, 192},
                                         Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 64},
                                         Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 128},
                                         Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 256},
                                         Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 96},
                                         Param{"kv_int4r", NINFER_DTYPE_KV_INT4R, 64},
                                         Param{"kv_int4r", NINFER_DTYPE_KV_INT4R, 128},
                                         Param{"kv_int4r", NINFER_DTYPE_KV_INT4R, 256}),
                         param_name);

constexpr int32_t kCompactDtypes[] = {NINFER_DTYPE_KV_INT8, NINFER_DTYPE_KV_FP8, NINFER_DTYPE_KV_INT4R};
constexpr uint32_t kCompactMask =
    (1u << NINFER_DTYPE_KV_INT8) | (1u << NINFER_DTYPE_KV_FP8) | (1u << NINFER_DTYPE_KV_INT4R);

// Needs no GPU: on every described card's plugin, the attention variants that read compact caches
// are the split-KV decode and the tiled prefill (all three formats, every head-dim class); the
// tensor-core variants declare none, refuse a compact shape in supports(), and refuse a compact
// cache at launch with a reason naming the variants that read it (the launch checks its arguments
// before touching the device). The fused decode op declares no compact format, so the planner
// runs it unfused, and plans a compact cache's attention on the variants that read it: a decode
// as a split-KV plan whose CTAs are all resident, a prompt on the tiled prefill.
TEST(GpuAttentionKvCompactPlan, CompactCachesPlanOnTheVariantsThatReadThemAndTheOthersRefuseThem) {
  const std::vector<Card> cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "this build has no CUDA plugin for a described card";
  for (const Card& card : cards) {
    const LoadedPlugin* p = card.plugin;
    SCOPED_TRACE(testing::Message() << card.dev.name << " (" << p->name() << ")");
    int readers = 0;
    for (const ninfer_variant* v : p->variants_for(NINFER_OP_ATTENTION)) {
      const std::string name = v->name;
      const bool reads = (v->dtype_mask & kCompactMask) != 0;
      readers += reads;
      if (reads) {
        EXPECT_EQ(v->dtype_mask & kCompactMask, kCompactMask) << name << " reads some compact formats, not all";
        EXPECT_FALSE(mma_variant(name)) << name;
        continue;
      }
      EXPECT_TRUE(mma_variant(name)) << name << ": only the tensor-core variants may leave compact caches out";
      for (int32_t dt : kCompactDtypes) {
        const ninfer_shape s{200, {128, 32, 8, 4096}, dt, 0, 0};
        if (v->supports) EXPECT_FALSE(v->supports(v->ctx, &s)) << name << " supports cache dtype " << dt;
        // Arguments the launch would accept but for the cache's dtype; pointers it never reads.
        alignas(16) static unsigned char dummy[64];
        ninfer_attention_args a{};
        a.q = a.out = reinterpret_cast<float*>(dummy);
        a.q_token_stride = a.out_token_stride = 32 * 128;
        a.q_head_stride = 128;
        a.heads = 32;
        a.tokens = 200;
        a.scale = 0.1f;
        const int32_t table[1] = {0};
        a.cache.k = a.cache.v = a.cache.k_scale = a.cache.v_scale = dummy;
        a.cache.slots = 1;
        a.cache.capacity = 4096;
        a.cache.kv_heads = 8;
        a.cache.head_dim = 128;
        a.cache.dtype = dt;
        a.cache.block_table = table;
        a.cache.block_tokens = 4096;
        a.cache.blocks_per_slot = 1;
        a.cache.pool_blocks = 1;
        const int32_t* ids = reinterpret_cast<const int32_t*>(dummy);
        a.batch = {1, ids, ids, ids, ids};
        ninfer_launch l{0, 200, 7, 1, 256, 0, 0, nullptr, 0, nullptr};
        char err[512] = {0};
        EXPECT_EQ(v->launch(v->ctx, &a, &l, nullptr, err, sizeof err), NINFER_ERR_INVALID_ARGUMENT)
            << name << " launched over cache dtype " << dt;
        EXPECT_NE(std::string(err).find("int8, fp8 and int4r caches are read by"), std::string::npos)
            << name << ": " << err;
      }
    }
    EXPECT_GT(readers, 0) << "no attention variant reads a compact cache";
    for (const ninfer_variant* v : p->variants_for(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION))
      EXPECT_EQ(v->dtype_mask & kCompactMask, 0u) << v->name << ": the fused decode declares a compact format";

    const Planner planner(*p, card.dev, nullptr, OpList(""));
    for (int32_t dt : kCompactDtypes)
      for (int64_t hd : {64, 128, 256}) {
        SCOPED_TRACE(testing::Message() << "cache dtype " << dt << ", head_dim " << hd);
        ninfer_shape decode{1, {hd, 32, 8, 4096}, dt, 0, 0};
        decode.kv_block_tokens = 64;
        const Plan d = planner.plan(NINFER_OP_ATTENTION, decode);
        EXPECT_TRUE(d.cooperative) << d.variant;
        EXPECT_LE(d.v->split_k, d.residency) << d.variant << ": every CTA resident";
        ninfer_shape prompt = decode;
        prompt.tokens = 512;
        const Plan f = planner.plan(NINFER_OP_ATTENTION, prompt);
        EXPECT_TRUE(is_prefill_variant(f.variant) && !mma_variant(f.variant)) << f.variant;
        ninfer_shape fused = decode;
        fused.max_seq_tokens = 1;
        EXPECT_TRUE(planner.plan(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, fused).unfused);
      }
  }
}

} // namespace
