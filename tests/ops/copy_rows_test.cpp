// copy_rows against its contract: rows of 32-bit words moved as bits at indices the call holds.
#include <gtest/gtest.h>

#include <cstring>

#include "ninfer/abi/ops/copy_rows.h"
#include "ninfer/support/error.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

void run_copy(Backend& be, const ninfer_copy_rows_args& a) {
  be.run(NINFER_OP_COPY_ROWS, {a.rows, {a.width, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
}

} // namespace

// Gathers and scatters with both index arrays, strides wider than the rows, and the untouched
// rows and columns of dst left as they were (poisoned here, so any stray write shows); NaN and
// int bits are copied as they are.
TEST(CopyRowsOp, MovesTheNamedRowsBitForBit) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("copy_rows");
  const int64_t width = 7, src_stride = 9, dst_stride = 8, src_rows = 11, dst_rows = 13;
  auto src = randn(rng, size_t(src_rows * src_stride));
  src[3] = std::numeric_limits<float>::quiet_NaN();
  const int32_t bits = 0x12345678;
  std::memcpy(&src[src_stride + 2], &bits, 4);
  const std::vector<int32_t> dst_index{12, 0, 5, 7}, src_index{1, 0, 10, 1};
  auto dst = poisoned(size_t(dst_rows * dst_stride));
  run_copy(be, {dst.data(), dst_stride, dst_index.data(), src.data(), src_stride, src_index.data(), 4, width});
  for (int64_t r = 0; r < dst_rows; ++r)
    for (int64_t c = 0; c < dst_stride; ++c) {
      const auto at = std::find(dst_index.begin(), dst_index.end(), static_cast<int32_t>(r));
      const float got = dst[r * dst_stride + c];
      if (at == dst_index.end() || c >= width) {
        EXPECT_TRUE(std::isnan(got)) << "row " << r << " column " << c << " was written";
        continue;
      }
      const int64_t s = src_index[static_cast<size_t>(at - dst_index.begin())];
      EXPECT_EQ(std::memcmp(&got, &src[s * src_stride + c], 4), 0) << "row " << r << " column " << c;
    }
  // Null indices are the identity.
  auto plain = poisoned(size_t(3 * width));
  run_copy(be, {plain.data(), width, nullptr, src.data(), src_stride, nullptr, 3, width});
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_EQ(std::memcmp(&plain[r * width], &src[r * src_stride], 4 * width), 0) << "row " << r;
}

// A call of several groups copies the same rows between each pair of buffers (each its own
// allocation, as a model's layers are) and leaves every other row of every buffer alone.
TEST(CopyRowsOp, GroupsCopyTheSameRowsBetweenEachPair) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("copy_rows groups");
  const int64_t width = 5, stride = 6, src_rows = 4, dst_rows = 3, groups = 3;
  std::vector<std::vector<float>> src, dst;
  for (int64_t g = 0; g < groups; ++g) {
    src.push_back(randn(rng, size_t(src_rows * stride)));
    dst.push_back(poisoned(size_t(dst_rows * stride)));
  }
  std::vector<void*> dst_bases;
  std::vector<const void*> src_bases;
  for (int64_t g = 0; g < groups; ++g) {
    dst_bases.push_back(dst[size_t(g)].data());
    src_bases.push_back(src[size_t(g)].data());
  }
  const std::vector<int32_t> dst_index{2, 0}, src_index{3, 1};
  ninfer_copy_rows_args a{nullptr, stride, dst_index.data(), nullptr, stride, src_index.data(), 2, width};
  a.groups = groups;
  a.dst_groups = dst_bases.data();
  a.src_groups = src_bases.data();
  run_copy(be, a);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < dst_rows; ++r)
      for (int64_t c = 0; c < stride; ++c) {
        const float got = dst[size_t(g)][size_t(r * stride + c)];
        const int64_t from = r == 2 ? 3 : r == 0 ? 1 : -1;
        if (from < 0 || c >= width) {
          EXPECT_TRUE(std::isnan(got)) << "group " << g << " row " << r << " column " << c << " was written";
          continue;
        }
        EXPECT_EQ(std::memcmp(&got, &src[size_t(g)][size_t(from * stride + c)], 4), 0)
            << "group " << g << " row " << r << " column " << c;
      }
  // Several groups need both arrays.
  a.src_groups = nullptr;
  EXPECT_THROW(run_copy(be, a), Error);
}

TEST(CopyRowsOp, RefusesStridesNarrowerThanTheRows) {
  Backend be = cpu_backend();
  std::vector<float> a(16), b(16);
  EXPECT_THROW(run_copy(be, {a.data(), 3, nullptr, b.data(), 4, nullptr, 2, 4}), Error);
}
