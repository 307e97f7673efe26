#include <cstring>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/fill_random.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

template <class T>
void fill_on(Backend& be, T* out, int64_t n, uint64_t seed, int32_t dtype) {
  ninfer_fill_random_args a{out, n, seed, 0.0346f, -0.25f, dtype};
  ninfer_shape s{};
  s.tokens = (n + NINFER_FILL_RANDOM_ROW - 1) / NINFER_FILL_RANDOM_ROW;
  s.dtype = dtype;
  be.run(NINFER_OP_FILL_RANDOM, s, &a);
}

} // namespace

// A benchmark model built on the GPU holds exactly the bits the CPU plugin would build: every
// element equal, F32 and BF16, counts ending mid-row, one row, and 40M elements (many waves).
TEST(GpuFillRandom, SameBitsAsCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  for (int64_t n : {int64_t{1}, int64_t{NINFER_FILL_RANDOM_ROW}, int64_t{5 * NINFER_FILL_RANDOM_ROW + 77},
                    int64_t{40'000'003}}) {
    std::vector<float> want(static_cast<size_t>(n));
    fill_on(*cpu, want.data(), n, 1234 + n, NINFER_DTYPE_F32);
    DeviceBuffer d = poisoned_buffer(*gpu, static_cast<size_t>(n));
    fill_on(*gpu, d.as<float>(), n, 1234 + n, NINFER_DTYPE_F32);
    const std::vector<float> got = get<float>(*gpu, d, static_cast<size_t>(n));
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << n << " f32 elements";

    std::vector<uint16_t> want16(static_cast<size_t>(n));
    fill_on(*cpu, want16.data(), n, 99, NINFER_DTYPE_BF16);
    DeviceBuffer d16 = put(*gpu, std::vector<uint16_t>(static_cast<size_t>(n), 0xFFFF));
    fill_on(*gpu, d16.as<uint16_t>(), n, 99, NINFER_DTYPE_BF16);
    ASSERT_EQ(get<uint16_t>(*gpu, d16, static_cast<size_t>(n)), want16) << n << " bf16 elements";
  }
}

// The code bytes of quantized benchmark weights (INT4, INT8, FP8): the same bytes as the CPU.
TEST(GpuFillRandom, CodeBytesSameAsCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3})
    for (int64_t n : {int64_t{3}, int64_t{3 * NINFER_FILL_RANDOM_ROW + 5}, int64_t{20'000'001}}) {
      std::vector<uint8_t> want(static_cast<size_t>(n));
      fill_on(*cpu, want.data(), n, 77 + n, dtype);
      DeviceBuffer d = put(*gpu, std::vector<uint8_t>(static_cast<size_t>(n), 0xEE));
      fill_on(*gpu, d.as<uint8_t>(), n, 77 + n, dtype);
      ASSERT_EQ(get<uint8_t>(*gpu, d, static_cast<size_t>(n)), want) << n << " bytes of dtype " << dtype;
    }
}
