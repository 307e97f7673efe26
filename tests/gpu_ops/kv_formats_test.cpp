// kv_append into a compact KV cache (KV_INT8, KV_FP8, KV_INT4R; kv_append.h) on the CUDA plugin
// against the CPU reference plugin. Both quantize with the same float32 operations in the same
// order (a correctly rounded division, round-half-even, the Hadamard butterflies stage by stage),
// so codes and scales must agree bit for bit: the CPU side is itself checked against a float64
// oracle (tests/ops/kv_formats_test.cpp). Rows span five decades of magnitude (fp8's subnormal
// codes, fp16's subnormal scales), some with an outlier channel, one all zero, one with a NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_common.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "kv_rows.hpp"
#include "op_routes.hpp"
#include "ninfer/abi/ops/kv_append.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Param {
  const char* name;
  int32_t dtype;
  int32_t head_dim;
};

// The shared spread rows (kv_rows.hpp) with one NaN element: its group's scale must be NaN on
// both plugins.
std::vector<float> rows_with_nan(std::mt19937_64& rng, int64_t rows, int32_t hd) {
  std::vector<float> x = rows_with_spread(rng, rows, hd);
  x[3 * hd + 5] = std::numeric_limits<float>::quiet_NaN();
  return x;
}


class GpuKvFormat : public testing::TestWithParam<Param> {};

TEST_P(GpuKvFormat, AppendWritesTheCpuReferencesCodesAndScales) {
  NINFER_REQUIRE_CUDA_BACKEND();
  const Param& p = GetParam();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng((std::string("gpu kv format ") + p.name).c_str());
  const int32_t slots = 3, capacity = 50, kv_heads = 4, hd = p.head_dim;
  // Paged through a shuffled table of 16-token blocks, two of them nobody's (kv_append.h).
  const KvBlockLayout blocks = KvBlockLayout::shuffled(slots, capacity, 16, 2, rng);
  const int64_t rows = blocks.pool_rows() * kv_heads;
  const size_t code_bytes = rows * ninfer_kv_row_bytes(p.dtype, hd), scale_bytes = rows * ninfer_kv_row_scale_bytes(p.dtype, hd);

  // A prefill chunk, a batch of decode rows, and a mixed call.
  Batch batches[] = {Batch({{2, 0, 37}}), Batch({{0, 0, 1}, {1, 0, 1}, {2, 37, 1}}), Batch({{0, 1, 12}, {1, 1, 1}})};
  const std::vector<uint8_t> poison_codes(code_bytes, 0x5a), poison_scales(scale_bytes, 0xff);
  DeviceBuffer ck = put(*cpu, poison_codes), cv = put(*cpu, poison_codes), cks = put(*cpu, poison_scales),
               cvs = put(*cpu, poison_scales);
  DeviceBuffer gk = put(*gpu, poison_codes), gv = put(*gpu, poison_codes), gks = put(*gpu, poison_scales),
               gvs = put(*gpu, poison_scales);
  const DeviceBuffer c_table = put(*cpu, blocks.table), g_table = put(*gpu, blocks.table);
  ninfer_kv_cache c_cache = blocks.cache(ck.data(), cv.data(), kv_heads, hd, p.dtype);
  ninfer_kv_cache g_cache = blocks.cache(gk.data(), gv.data(), kv_heads, hd, p.dtype);
  blocks.attach(c_cache, c_table.as<int32_t>());
  blocks.attach(g_cache, g_table.as<int32_t>());
  c_cache.k_scale = cks.data();
  c_cache.v_scale = cvs.data();
  g_cache.k_scale = gks.data();
  g_cache.v_scale = gvs.data();
  for (const Batch& b : batches) {
    const int64_t T = b.tokens(), row = int64_t{kv_heads} * hd, stride = row + 3;
    const std::vector<float> k = rows_with_nan(rng, T * stride / hd + 1, hd), v = rows_with_nan(rng, T * stride / hd + 1, hd);
    ninfer_shape shape{T, {hd, kv_heads, 0, 0}, p.dtype};
    shape.kv_block_tokens = blocks.block_tokens;
    const BatchOn cbo(*cpu, b), gbo(*gpu, b);
    const ninfer_token_batch cb = cbo.batch, gb = gbo.batch;
    DeviceBuffer ckin = put(*cpu, k), cvin = put(*cpu, v), gkin = put(*gpu, k), gvin = put(*gpu, v);
    const ninfer_kv_append_args ca{ckin.as<float>(), stride, cvin.as<float>(), stride, c_cache, cb, T};
    cpu->run(NINFER_OP_KV_APPEND, shape, &ca);
    const ninfer_kv_append_args ga{gkin.as<float>(), stride, gvin.as<float>(), stride, g_cache, gb, T};
    auto check = [&](const std::string& what, const std::string&) {
      for (const auto& [name, c, g, n] : {std::tuple{"K codes", &ck, &gk, code_bytes}, std::tuple{"V codes", &cv, &gv, code_bytes},
                                          std::tuple{"K scales", &cks, &gks, scale_bytes},
                                          std::tuple{"V scales", &cvs, &gvs, scale_bytes}}) {
        const std::vector<uint8_t> want = get<uint8_t>(*cpu, *c, n), got = get<uint8_t>(*gpu, *g, n);
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; ++i)
          if (want[i] != got[i] && bad++ == 0) first = i;
        EXPECT_EQ(bad, 0u) << p.name << " hd " << hd << " " << what << ": " << name << " differ at " << bad
                           << " bytes, first at byte " << first;
      }
    };
    const VariantRuns runs = run_variants_then_plan(*gpu, NINFER_OP_KV_APPEND, shape, &ga, check);
    EXPECT_GE(runs.ran, 1) << "no variant writes a " << p.name << " cache";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GpuKvFormat,
                         testing::Values(Param{"kv_int8", NINFER_DTYPE_KV_INT8, 64}, Param{"kv_int8", NINFER_DTYPE_KV_INT8, 128},
                                         Param{"kv_int8", NINFER_DTYPE_KV_INT8, 256}, Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 64},
                                         Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 128}, Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 256},
                                         Param{"kv_fp8", NINFER_DTYPE_KV_FP8, 96}, Param{"kv_int4r", NINFER_DTYPE_KV_INT4R, 64},
                                         Param{"kv_int4r", NINFER_DTYPE_KV_INT4R, 128},
                                         Param{"kv_int4r", NINFER_DTYPE_KV_INT4R, 256}),
                         [](const testing::TestParamInfo<Param>& p) {
                           return std::string(p.param.name) + "_hd" + std::to_string(p.param.head_dim);
                         });

} // namespace
