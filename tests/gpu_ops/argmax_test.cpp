#include "ninfer/abi/ops/argmax.h"

#include "gpu_op_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

// The device's greedy choice equals the CPU plugin's on fresh rows of Qwen3's vocabulary,
// ties and -inf included (T = 1, a decode batch, and a slice of LM-head rows).
TEST(GpuArgmax, MatchesCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("argmax gpu");
  const int32_t vocab = 151936;
  for (int64_t rows : {1, 7, 64}) {
    auto cpu = make_cpu_backend();
    auto gpu = make_cuda_backend();
    auto logits = randn(rng, rows * vocab, 3.f);
    logits[5] = logits[vocab - 2] = 40.f; // a tie in row 0: id 5 must win
    for (int32_t j = 0; j < vocab; j += 3) logits[(rows - 1) * vocab + j] = -INFINITY;
    std::vector<int32_t> ids_cpu(rows);
    std::vector<float> lp_cpu(rows);
    ninfer_argmax_args ac{logits.data(), vocab, ids_cpu.data(), lp_cpu.data(), rows, vocab};
    const ninfer_shape s{rows, {vocab, 0, 0, 0}, NINFER_DTYPE_F32};
    cpu->run(NINFER_OP_ARGMAX, s, &ac);
    DeviceBuffer dl = put(*gpu, logits), dids = put(*gpu, std::vector<int32_t>(rows, -7)),
                 dlp = poisoned_buffer(*gpu, rows);
    ninfer_argmax_args ag{dl.as<float>(), vocab, dids.as<int32_t>(), dlp.as<float>(), rows, vocab};
    gpu->run(NINFER_OP_ARGMAX, s, &ag);
    EXPECT_EQ(get<int32_t>(*gpu, dids, rows), ids_cpu) << rows << " rows";
    const Mismatch m = compare(get<float>(*gpu, dlp, rows), widen(lp_cpu), kGpuVsCpuF32);
    EXPECT_TRUE(m.ok) << m.describe();
    EXPECT_EQ(ids_cpu[0], 5);
  }
}
