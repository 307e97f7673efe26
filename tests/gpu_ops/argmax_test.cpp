#include "ninfer/abi/ops/argmax.h"

#include "gpu_op_env.hpp"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

// The device's greedy choice equals the CPU plugin's on fresh rows, ties and -inf included (T =
// 1, a decode batch, and a slice of LM-head rows), on every route: block_per_row and row_split
// (slices of 8,192 entries meeting through the launch tickets; Qwen3's and Qwen3.5's
// vocabularies, two slices of 4,096 and 4,097 entries, and a single slice).
TEST(GpuArgmax, MatchesCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("argmax gpu");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  int runs = 0;
  for (int32_t vocab : {151936, 248320, 8193, 1000})
    for (int64_t rows : {1, 7, 64}) {
      auto logits = randn(rng, rows * vocab, 3.f);
      logits[5] = logits[vocab - 2] = 40.f; // a tie in row 0: id 5 must win
      for (int32_t j = 0; j < vocab; j += 3) logits[(rows - 1) * vocab + j] = -INFINITY;
      std::vector<int32_t> ids_cpu(rows);
      std::vector<float> lp_cpu(rows);
      ninfer_argmax_args ac{logits.data(), vocab, ids_cpu.data(), lp_cpu.data(), rows, vocab};
      const ninfer_shape s{rows, {vocab, 0, 0, 0}, NINFER_DTYPE_F32};
      cpu->run(NINFER_OP_ARGMAX, s, &ac);
      ASSERT_EQ(ids_cpu[0], 5);
      DeviceBuffer dl = put(*gpu, logits);
      gpu->reserve_workspace(NINFER_OP_ARGMAX, s);
      for (const std::string& route : op_routes(*gpu, NINFER_OP_ARGMAX, &s)) {
        DeviceBuffer dids = put(*gpu, std::vector<int32_t>(rows, -7)), dlp = poisoned_buffer(*gpu, rows);
        ninfer_argmax_args ag{dl.as<float>(), vocab, dids.as<int32_t>(), dlp.as<float>(), rows, vocab};
        run_route(*gpu, NINFER_OP_ARGMAX, route, s, &ag);
        const std::string what = std::to_string(rows) + " rows of " + std::to_string(vocab) + ", " + route_name(route);
        EXPECT_EQ(get<int32_t>(*gpu, dids, rows), ids_cpu) << what;
        const Mismatch m = compare(get<float>(*gpu, dlp, rows), widen(lp_cpu), kGpuVsCpuF32);
        EXPECT_TRUE(m.ok) << what << ": " << m.describe();
        ++runs;
      }
    }
  EXPECT_GT(runs, 24); // two variants and the planner's choice on each case
}
