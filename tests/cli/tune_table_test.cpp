// ninfer-tune's choices as a table, without a device: which matrices --by-matrix routes apart
// from their bucket's variant, and the table tuned_table writes from them (order, merged
// buckets, dims ranges, the schema). The measuring itself is ninfer_tune_tests' (a process on
// the CPU plugin, whose one linear candidate can never be routed apart).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "matrix_choice.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "test_support.hpp"
#include "tune_report.hpp"
#include "tuner.hpp"

using namespace ninfer;
using namespace ninfer::tools;

namespace {

MatrixTimes times(int64_t in, int64_t out, std::map<std::string, double> us) { return {{in, out, 0}, std::move(us)}; }

ninfer_shape linear_shape(int64_t tokens, int64_t in, int64_t out, int64_t dims2 = 0) {
  ninfer_shape s{};
  s.tokens = tokens;
  s.dims[0] = in;
  s.dims[1] = out;
  s.dims[2] = dims2;
  return s;
}

BucketResult bucket(std::string op, int64_t tokens, std::string variant, std::vector<MatrixChoice> m) {
  BucketResult b;
  b.op = std::move(op);
  b.tokens = tokens;
  b.default_variant = "a";
  b.tuned_variant = std::move(variant);
  b.matrices = std::move(m);
  return b;
}

} // namespace

TEST(TuneMatrixChoice, RoutesAMatrixApartOnlyBeyondTheNoiseMargin) {
  // Times relative to the bucket's variant "a" on each matrix.
  const double a = 100.0;
  const std::vector<MatrixTimes> measured = {
      times(4096, 4096, {{"a", a}, {"b", a * (1 - 2 * kMatrixMargin)}}),                    // clearly faster: routed
      times(4096, 12288, {{"a", a}, {"b", a * (1 - kMatrixMargin / 2)}}),                   // within the margin: not
      times(12288, 4096, {{"a", a}, {"b", a * 0.9}, {"c", a * 0.8}}),                       // the fastest of two wins
      times(4096, 151936, {{"b", 1.0}}),                                                    // "a" not measured here
      times(2048, 2048, {{"a", a}, {"b", a * 1.5}}),                                        // "a" is this one's best
  };
  const std::vector<MatrixChoice> got = matrix_choices(measured, "a");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].dims, (MatrixDims{4096, 4096, 0}));
  EXPECT_EQ(got[0].variant, "b");
  EXPECT_DOUBLE_EQ(got[0].us, a * (1 - 2 * kMatrixMargin));
  EXPECT_DOUBLE_EQ(got[0].bucket_us, a);
  EXPECT_EQ(got[1].dims, (MatrixDims{12288, 4096, 0}));
  EXPECT_EQ(got[1].variant, "c");
  EXPECT_DOUBLE_EQ(got[1].us, a * 0.8);
}

TEST(TuneTable, MatrixEntriesComeFirstMergeAcrossBucketsAndRouteOnlyTheirMatrix) {
  TuneRun run;
  const MatrixDims square{4096, 4096, 0}, wide{4096, 12288, 0};
  run.buckets.push_back(bucket("linear", 1, "a", {{square, "b", 9, 10}}));
  run.buckets.push_back(bucket("linear", 4, "a", {{square, "b", 9, 10}, {wide, "c", 9, 10}}));
  run.buckets.push_back(bucket("linear", 16, "", {})); // reverted or unmeasured: built-in
  run.buckets.push_back(bucket("linear", 64, "d", {{square, "b", 9, 10}}));
  ScheduleTable builtin;
  builtin.arch = "cpu";
  builtin.entries.push_back({"linear", 1, 1 << 20, "builtin", std::nullopt, "", {}});
  const ScheduleDevice dev{"host CPU", 0, 0, "cpu", "0.1.0"};
  const ScheduleTable t = tuned_table(run, builtin, dev);

  // Matrix entries, then the buckets' entries, then the built-in ones.
  ASSERT_EQ(t.entries.size(), 6u);
  const std::vector<std::pair<int64_t, int64_t>> m4096 = {{4096, 4096}, {4096, 4096}, {0, 0}};
  EXPECT_EQ(t.entries[0].variant, "b");
  EXPECT_EQ(t.entries[0].dims, m4096);
  EXPECT_EQ(t.entries[0].tokens_min, 1);
  EXPECT_EQ(t.entries[0].tokens_max, 4) << "buckets 1 and 4 share the matrix's choice: one entry";
  EXPECT_EQ(t.entries[1].variant, "c");
  EXPECT_EQ(t.entries[1].tokens_min, 2);
  EXPECT_EQ(t.entries[1].tokens_max, 4);
  EXPECT_EQ(t.entries[2].variant, "b");
  EXPECT_EQ(t.entries[2].tokens_min, 17) << "not merged across the untuned bucket 16";
  EXPECT_EQ(t.entries[2].tokens_max, 64);
  EXPECT_EQ(t.entries[3].variant, "a");
  EXPECT_TRUE(t.entries[3].dims.empty());
  EXPECT_EQ(t.entries[4].variant, "d");
  EXPECT_EQ(t.entries[5].variant, "builtin");

  // Routes: the first covering entry wins.
  auto route = [&](int64_t tokens, int64_t in, int64_t out) {
    const ScheduleEntry* e = t.lookup("linear", linear_shape(tokens, in, out));
    return e ? e->variant : std::string("-");
  };
  EXPECT_EQ(route(3, 4096, 4096), "b");
  EXPECT_EQ(route(1, 4096, 12288), "a") << "bucket 1 did not route this matrix apart";
  EXPECT_EQ(route(3, 4096, 12288), "c");
  EXPECT_EQ(route(3, 4096, 4097), "a") << "a dims range covers its own matrix only";
  EXPECT_EQ(route(10, 4096, 4096), "builtin");
  EXPECT_EQ(route(40, 4096, 4096), "b");
  EXPECT_EQ(route(40, 12288, 4096), "d");

  // The written table is a valid schedule table, and reads back with the same routes.
  const auto file = std::filesystem::temp_directory_path() / ("ninfer-tune-table-" + std::to_string(::getpid()) + ".yaml");
  save_schedule_table(t, file);
  const ScheduleTable back = load_schedule_table(file, test::data_dir() / "schemas");
  std::filesystem::remove(file);
  ASSERT_EQ(back.entries.size(), t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) {
    EXPECT_EQ(back.entries[i].variant, t.entries[i].variant) << i;
    EXPECT_EQ(back.entries[i].dims, t.entries[i].dims) << i;
    EXPECT_EQ(back.entries[i].tokens_min, t.entries[i].tokens_min) << i;
    EXPECT_EQ(back.entries[i].tokens_max, t.entries[i].tokens_max) << i;
  }
}

// A matrix entry pins the shape's dims[2] as well: norm_linear's gated gate|up and a plain
// projection of the same K and width are two matrices, and routing one apart must leave the
// other on its bucket's variant (entries of dims[0..1] alone routed both).
TEST(TuneTable, MatrixEntriesKeepAGatedAndAPlainNormLinearOfOneWidthApart) {
  TuneRun run;
  run.buckets.push_back(bucket("norm_linear", 1, "a", {{{4096, 24576, 1}, "b", 9, 10}}));
  ScheduleTable builtin;
  builtin.arch = "cpu";
  const ScheduleTable t = tuned_table(run, builtin, ScheduleDevice{"host CPU", 0, 0, "cpu", "0.1.0"});
  auto route = [&](int64_t gated) {
    const ScheduleEntry* e = t.lookup("norm_linear", linear_shape(1, 4096, 24576, gated));
    return e ? e->variant : std::string("-");
  };
  EXPECT_EQ(route(1), "b");
  EXPECT_EQ(route(0), "a") << "the plain matrix of the same width took the gated one's route";
  EXPECT_EQ(matrix_name({4096, 24576, 1}), "4096x24576 dims[2]=1");
  EXPECT_EQ(matrix_name({4096, 4096, 0}), "4096x4096");
}

// Each tuned entry names the weight dtype it was measured on: the int4 buckets' choice routes
// int4 calls only, the bf16 buckets' bf16 calls only, a dtype not tuned goes on to the built-in
// entries, and buckets of one dtype merge among themselves but never with another dtype's.
TEST(TuneTable, EntriesRouteOnlyTheDtypeTheyWereMeasuredOn) {
  TuneRun run;
  auto typed = [](int32_t dtype, int64_t tokens, std::string variant, std::vector<MatrixChoice> m = {}) {
    BucketResult b = bucket("linear", tokens, std::move(variant), std::move(m));
    b.dtype = dtype;
    return b;
  };
  run.buckets.push_back(typed(NINFER_DTYPE_BF16, 1, "gemv"));
  run.buckets.push_back(typed(NINFER_DTYPE_BF16, 4, "gemv"));
  run.buckets.push_back(typed(NINFER_DTYPE_INT4, 1, "quant_gemv", {{{4096, 4096, 128}, "quant_other", 9, 10}}));
  run.buckets.push_back(typed(NINFER_DTYPE_INT4, 4, "gemv")); // a name both dtypes chose
  ScheduleTable builtin;
  builtin.arch = "cpu";
  builtin.entries.push_back({"linear", 1, 1 << 20, "builtin", std::nullopt, "", {}});
  const ScheduleTable t = tuned_table(run, builtin, ScheduleDevice{"host CPU", 0, 0, "cpu", "0.1.0"});
  ASSERT_EQ(t.entries.size(), 5u);
  EXPECT_EQ(t.entries[0].dtypes, std::vector<int32_t>{NINFER_DTYPE_INT4}) << "the int4 matrix's entry";
  EXPECT_EQ(t.entries[1].dtypes, std::vector<int32_t>{NINFER_DTYPE_BF16});
  EXPECT_EQ(t.entries[1].tokens_max, 4) << "bf16 buckets 1 and 4 merge";
  EXPECT_EQ(t.entries[2].dtypes, std::vector<int32_t>{NINFER_DTYPE_INT4});
  EXPECT_EQ(t.entries[3].dtypes, std::vector<int32_t>{NINFER_DTYPE_INT4});
  EXPECT_EQ(t.entries[3].tokens_min, 2) << "int4's bucket 4 is not merged into bf16's entry of the same variant";
  EXPECT_TRUE(t.entries[4].dtypes.empty()) << "the built-in entry as it was";

  auto route = [&](int32_t dtype, int64_t tokens, int64_t dims2) {
    ninfer_shape s = linear_shape(tokens, 4096, 4096, dims2);
    s.dtype = dtype;
    const ScheduleEntry* e = t.lookup("linear", s);
    return e ? e->variant : std::string("-");
  };
  EXPECT_EQ(route(NINFER_DTYPE_INT4, 1, 128), "quant_other");
  EXPECT_EQ(route(NINFER_DTYPE_INT4, 1, 64), "quant_gemv") << "another group size is another matrix";
  EXPECT_EQ(route(NINFER_DTYPE_BF16, 1, 0), "gemv");
  EXPECT_EQ(route(NINFER_DTYPE_BF16, 1, 128), "gemv") << "the int4 matrix entry must not take a bf16 call";
  EXPECT_EQ(route(NINFER_DTYPE_INT8, 1, 128), "builtin") << "int8 was not tuned";
  EXPECT_EQ(route(NINFER_DTYPE_F32, 3, 0), "builtin") << "float32 was not tuned";

  // The dtypes survive the schema and a save and load.
  const auto file = std::filesystem::temp_directory_path() / ("ninfer-tune-dtypes-" + std::to_string(::getpid()) + ".yaml");
  save_schedule_table(t, file);
  const ScheduleTable back = load_schedule_table(file, test::data_dir() / "schemas");
  std::filesystem::remove(file);
  ASSERT_EQ(back.entries.size(), t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) EXPECT_EQ(back.entries[i].dtypes, t.entries[i].dtypes) << i;
}
