// The drafter's int4 LM head rows (core/models/draft_head.hpp) on the CPU plugin, from fresh
// random float32 and bfloat16 LM heads: `linear` over the int4 rows against x . W in float64.
// Round to nearest moves each weight by at most half its group's step, and the step is
// max|w| / 7 of the group rounded up to a bfloat16 (at most 2^-7 above it), so every output
// lies within sum_k |x_k| step_k / 2 of the exact product, plus float32 accumulation. Codes in the wrong nibble, a wrong scale or a wrong group miss that bound by
// far. A quantized LM head is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "draft_head.hpp"
#include "model_test_env.hpp"
#include "ninfer/support/error.hpp"
#include "op_calls.hpp"

using namespace ninfer;
using namespace ninfer::test;
using ninfer::models::Matrix;

namespace {

Matrix upload_head(Backend& be, const std::vector<float>& w, int64_t rows, int64_t cols, bool bf16) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.dtype = bf16 ? NINFER_DTYPE_BF16 : NINFER_DTYPE_F32;
  m.format = bf16 ? "bfloat16" : "float32";
  const size_t n = w.size();
  m.buf = be.allocate_weights(n * (bf16 ? 2 : 4), m.format, "lm_head");
  if (bf16) {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = to_bf16(w[i]);
    be.upload(m.buf, 0, h.data(), n * 2);
  } else {
    be.upload(m.buf, 0, w.data(), n * 4);
  }
  return m;
}

} // namespace

TEST(DraftHead, Int4RowsProjectWithinRoundToNearestOfTheLmHead) {
  auto rng = fresh_rng("DraftHead int4 rows");
  std::normal_distribution<float> normal(0.f, 0.05f);
  struct Case {
    int64_t vocab, cols, rows, tokens;
    bool bf16;
  };
  // 384 columns: three groups of 128; 200: one group per row.
  for (const Case& c : {Case{96, 384, 40, 3, true}, Case{64, 384, 64, 1, false}, Case{50, 200, 17, 2, true}}) {
    Backend be = cpu_model_backend();
    std::vector<float> w(static_cast<size_t>(c.vocab * c.cols));
    for (float& v : w) v = normal(rng);
    if (c.bf16)
      for (float& v : w) v = from_bf16(to_bf16(v)); // what the bfloat16 head holds
    const Matrix head = upload_head(be, w, c.vocab, c.cols, c.bf16);
    const Matrix q = models::int4_draft_rows(be, head, c.rows);
    ASSERT_EQ(q.rows, c.rows);
    ASSERT_EQ(q.dtype, NINFER_DTYPE_INT4);
    std::vector<float> x(static_cast<size_t>(c.tokens * c.cols));
    for (float& v : x) v = normal(rng) * 20.f;
    DeviceBuffer xb = be.allocate(x.size() * 4, MemoryUse::Activations, "x");
    DeviceBuffer yb = be.allocate(static_cast<size_t>(c.tokens * c.rows) * 4, MemoryUse::Activations, "y");
    be.upload(xb, 0, x.data(), x.size() * 4);
    models::ops::linear(be, c.tokens, {xb.as<float>(), c.cols}, q, {yb.as<float>(), c.rows});
    std::vector<float> y(static_cast<size_t>(c.tokens * c.rows));
    be.download(yb, 0, y.data(), y.size() * 4);
    const int64_t group = c.cols % 128 == 0 ? 128 : c.cols;
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t n = 0; n < c.rows; ++n) {
        double exact = 0, bound = 0;
        for (int64_t g = 0; g < c.cols / group; ++g) {
          double hi = 0;
          for (int64_t k = g * group; k < (g + 1) * group; ++k) hi = std::max(hi, std::fabs(double(w[n * c.cols + k])));
          const double step = hi / 7 * (1 + std::ldexp(1.0, -7));
          for (int64_t k = g * group; k < (g + 1) * group; ++k) {
            const double xv = x[static_cast<size_t>(t * c.cols + k)];
            exact += xv * w[static_cast<size_t>(n * c.cols + k)];
            bound += std::fabs(xv) * step / 2;
          }
        }
        const double got = y[static_cast<size_t>(t * c.rows + n)];
        EXPECT_LE(std::fabs(got - exact), bound * (1 + kFloat32Exact.rel) + kFloat32Exact.abs)
            << "vocab " << c.vocab << " cols " << c.cols << " token " << t << " row " << n << ": " << got
            << " against " << exact;
      }
  }
}

TEST(DraftHead, RefusesAQuantizedLmHead) {
  Backend be = cpu_model_backend();
  Matrix head;
  head.dtype = NINFER_DTYPE_INT4;
  head.rows = 8;
  head.cols = 128;
  head.format = "gptq int4 g128";
  try {
    models::int4_draft_rows(be, head, 8);
    FAIL() << "an int4 LM head was quantized again";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gptq int4 g128"), std::string::npos) << e.what();
  }
}
