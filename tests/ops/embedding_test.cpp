#include <gtest/gtest.h>

#include "ninfer/abi/ops/embedding.h"
#include "ninfer/support/error.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(EmbeddingOp, GathersRowsOfF32AndBf16Tables) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("embedding");
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16}) {
    const int32_t vocab = 37, dim = 24;
    const int64_t T = 11, stride = dim + 5;
    std::vector<float> table = randn(rng, static_cast<size_t>(vocab) * dim);
    std::vector<uint16_t> table_bf16(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      table_bf16[i] = to_bf16(table[i]);
      if (dtype == NINFER_DTYPE_BF16) table[i] = from_bf16(table_bf16[i]); // what the op sees
    }
    std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
    std::vector<int32_t> ids(T);
    for (auto& id : ids) id = pick(rng);
    ids[0] = 0;
    ids[1] = vocab - 1; // both ends of the table

    std::vector<float> out = poisoned(T * stride);
    std::vector<double> want(out.size());
    std::vector<float> got(out.size());
    ninfer_embedding_args a{ids.data(),
                            dtype == NINFER_DTYPE_F32 ? static_cast<const void*>(table.data()) : table_bf16.data(),
                            out.data(), stride, T, vocab, dim, dtype};
    be.run(NINFER_OP_EMBEDDING, {T, {dim, vocab, 0, 0}, dtype}, &a);
    // Compare only the row contents; the padding between rows stays NaN and is skipped.
    std::vector<float> rows;
    std::vector<double> ref;
    for (int64_t t = 0; t < T; ++t)
      for (int32_t i = 0; i < dim; ++i) {
        rows.push_back(out[t * stride + i]);
        ref.push_back(table[static_cast<size_t>(ids[t]) * dim + i]);
      }
    const Mismatch m = compare(rows, ref, kFloat32Exact);
    EXPECT_TRUE(m.ok) << "dtype " << dtype << ": " << m.describe();
    for (int64_t t = 0; t < T; ++t) // untouched padding: the op writes its rows only
      for (int64_t i = dim; i < stride; ++i) EXPECT_TRUE(std::isnan(out[t * stride + i]));
  }
}

TEST(EmbeddingOp, RejectsAnIdOutsideTheVocabulary) {
  Backend be = cpu_backend();
  std::vector<float> table(4 * 8, 1.f), out(2 * 8);
  std::vector<int32_t> ids{1, 4};
  ninfer_embedding_args a{ids.data(), table.data(), out.data(), 8, 2, 4, 8, NINFER_DTYPE_F32};
  try {
    be.run(NINFER_OP_EMBEDDING, {2, {8, 4, 0, 0}, NINFER_DTYPE_F32}, &a);
    FAIL() << "an id equal to the vocabulary size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("id 4"), std::string::npos) << e.what();
  }
}
