// Timing, not a test: DISABLED_, so it runs only when asked for
// (gpu_op_tests --gtest_filter='GpuAttentionTiming.*' --gtest_also_run_disabled_tests). It times
// the prefill attention variants on the attention shapes of Qwen3-8B and Qwen3.5-27B, one
// prompt of T tokens from position 0, as a prefill runs them in every attention layer, and
// prints the median of 5 runs (after a warm-up) with the rate in causal FLOP: 4 x head_dim per
// (query, visible key) pair and head. The evidence behind docs/cuda-attention.md's table;
// correctness is attention_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "ninfer/abi/ops/attention.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

TEST(GpuAttentionTiming, DISABLED_PrefillVariantsOnQwenShapes) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu attention timing");
  struct Shape {
    const char* name;
    int32_t head_dim, heads, kv_heads;
  };
  constexpr int32_t kCapacity = 8192;
  for (const Shape& sh : {Shape{"Qwen3-8B", 128, 32, 8}, Shape{"Qwen3.5-27B", 256, 24, 4}}) {
    const size_t cache_elems = size_t{kCapacity} * sh.kv_heads * sh.head_dim;
    const DeviceBuffer k = put(*gpu, randn(rng, cache_elems), "K cache");
    const DeviceBuffer v = put(*gpu, randn(rng, cache_elems), "V cache");
    const KvBlockLayout blocks = KvBlockLayout::identity(1, kCapacity, 64); // the identity table: one contiguous slot
    const DeviceBuffer table = put(*gpu, blocks.table, "KV block table");
    ninfer_kv_cache cache = blocks.cache(k.as<float>(), v.as<float>(), sh.kv_heads, sh.head_dim, NINFER_DTYPE_F32);
    blocks.attach(cache, table.as<int32_t>());
    for (int32_t T : {512, 4096, 8192}) {
      std::vector<int32_t> pos(T), seq(T, 0), seq_start{0, T}, slot{0};
      std::iota(pos.begin(), pos.end(), 0);
      const int64_t width = int64_t{sh.heads} * sh.head_dim;
      const DeviceBuffer q = put(*gpu, randn(rng, T * width), "q");
      const DeviceBuffer out = poisoned_buffer(*gpu, T * width, "out");
      const DeviceBuffer d_start = put(*gpu, seq_start), d_slot = put(*gpu, slot), d_pos = put(*gpu, pos),
                         d_seq = put(*gpu, seq);
      const ninfer_attention_args a{q.as<float>(), width, sh.head_dim,
                                    cache,
                                    {1, d_start.as<int32_t>(), d_slot.as<int32_t>(), d_pos.as<int32_t>(),
                                     d_seq.as<int32_t>()},
                                    out.as<float>(), width, T, sh.heads,
                                    1.f / std::sqrt(static_cast<float>(sh.head_dim))};
      const ninfer_shape shape{T, {sh.head_dim, sh.heads, sh.kv_heads, T}, NINFER_DTYPE_F32};
      gpu->reserve_workspace(NINFER_OP_ATTENTION, shape);
      const double flop = 4.0 * sh.head_dim * sh.heads * (double(T) * (T + 1) / 2);
      int timed = 0;
      for (const ninfer_variant* var : gpu->plugin().variants_for(NINFER_OP_ATTENTION)) {
        if (var->cooperative || !var->supports(var->ctx, &shape)) continue;
        gpu->run_variant(NINFER_OP_ATTENTION, var->name, shape, &a); // warm-up (and module load)
        gpu->synchronize();
        std::vector<double> ms;
        for (int i = 0; i < 5; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          gpu->run_variant(NINFER_OP_ATTENTION, var->name, shape, &a);
          gpu->synchronize();
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        std::printf("attention timing: %-11s T=%5d %-18s %9.3f ms  %6.1f TFLOP/s  (min %.3f max %.3f)\n", sh.name, T,
                    var->name, ms[2], flop / (ms[2] * 1e-3) / 1e12, ms.front(), ms.back());
        const std::vector<float> o = get<float>(*gpu, out, 64 * width);
        EXPECT_TRUE(std::all_of(o.begin(), o.end(), [](float x) { return std::isfinite(x); })) << var->name;
        ++timed;
      }
      EXPECT_GE(timed, 1);
      std::printf("attention timing: %-11s T=%5d planner's choice %s\n", sh.name, T,
                  gpu->plan(NINFER_OP_ATTENTION, shape).variant.c_str());
    }
  }
}

} // namespace
