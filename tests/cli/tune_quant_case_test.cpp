// ninfer-tune on quantized weights, as units on the CPU plugin: the layouts it reads from a model
// (quant_layout.cpp: the scale dtype, zero points, group size and g_idx its calls read, which the
// planning shape does not carry) and its check of a variant against the CPU reference
// (op_cases.cpp), which must catch a variant that reads any part of a quantized layout wrong.
// The whole tool on a quantized model: ninfer_tune_tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/support/error.hpp"
#include "op_cases.hpp"
#include "preset_weights.hpp"
#include "quant_layout.hpp"
#include "test_support.hpp"

using namespace ninfer;
using namespace ninfer::test;
using namespace ninfer::tools;

namespace {

Backend cpu_backend() {
  const LoadedPlugin* cpu = build_plugins().find("cpu");
  if (!cpu) throw Error("the cpu plugin is missing from " + plugin_dir().string());
  return Backend(*cpu, host_device());
}

std::map<QuantLayoutKey, QuantLayout> fixture_layouts(const char* name) {
  return model_quant_layouts(Checkpoint::open(fixtures_dir() / "quant" / name / "quantized"));
}

void expect_layout(const std::map<QuantLayoutKey, QuantLayout>& got, QuantLayoutKey key, const QuantLayout& want,
                   const char* what) {
  ASSERT_EQ(got.size(), 1u) << what;
  ASSERT_EQ(got.begin()->first, key) << what;
  const QuantLayout& l = got.begin()->second;
  EXPECT_EQ(l.describe(), want.describe()) << what;
}

// A corruption of a call's quantized weights, as a faulty variant would read them.
struct Fault {
  const char* what;
  void (*apply)(ninfer_quant_weight&);
};

} // namespace

// Each published layout keeps what its kernels read: the scale dtype as stored, zero points
// (AWQ), g_idx only where it is not k / group (GPTQ act order, under planning group 0), FP8
// blocks as groups of their columns. A preset's --weights are symmetric with bf16 scales.
TEST(TuneQuantLayout, ReadsEachModelsLayout) {
  expect_layout(fixture_layouts("tiny-qwen3-gptq4"), {NINFER_DTYPE_INT4, 32}, {NINFER_DTYPE_F16, false, false, 32},
                "gptq (its trivial g_idx dropped)");
  expect_layout(fixture_layouts("tiny-qwen3_5-gptq4-actorder"), {NINFER_DTYPE_INT4, 0}, {NINFER_DTYPE_F16, false, true, 32},
                "gptq act order");
  expect_layout(fixture_layouts("tiny-qwen3-awq"), {NINFER_DTYPE_INT4, 32}, {NINFER_DTYPE_F16, true, false, 32}, "awq");
  expect_layout(fixture_layouts("tiny-qwen3_5-ct-w4"), {NINFER_DTYPE_INT4, 32}, {NINFER_DTYPE_BF16, false, false, 32},
                "compressed-tensors");
  expect_layout(fixture_layouts("tiny-qwen3-fp8"), {NINFER_DTYPE_FP8_E4M3, 32}, {NINFER_DTYPE_F32, false, false, 32},
                "fp8 blocks");
  const ModelConfig cfg = shape_preset_config("qwen3-cpu-small");
  const Checkpoint preset = Checkpoint::synthetic(cfg, DType::BF16, 0, quantized_tensors(cfg, *parse_weights_spec("int8-g128")));
  expect_layout(model_quant_layouts(preset), {NINFER_DTYPE_INT8, 128}, {NINFER_DTYPE_BF16, false, false, 128},
                "preset int8-g128");
  EXPECT_TRUE(model_quant_layouts(Checkpoint::synthetic(cfg, DType::BF16, 0)).empty());
  // A call the model has no weights for is an error naming it, never a made-up layout.
  const auto awq = fixture_layouts("tiny-qwen3-awq");
  EXPECT_EQ(quant_layout_for(awq, "norm_linear", {1, {64, 128, 1, 0}, NINFER_DTYPE_INT4}).describe(),
            "g32, float16 scales, zero points");
  try {
    (void)quant_layout_for(awq, "linear", {1, {64, 128, 64, 0}, NINFER_DTYPE_INT4});
    ADD_FAILURE() << "no error for a group the model does not have";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear 64x128 on int4 weights (planning group 64)"), std::string::npos)
        << e.what();
  }
}

// The check every variant passes before it is timed: the CPU plugin's own variant on the case's
// inputs agrees with the reference, and the same call reading a part of the layout wrong (the
// scales' dtype, the zero points, the group size, the g_idx) is far outside the tolerance (the
// smallest, groups twice as wide on int4 g64: a relative L2 of 0.2, ten times the bound).
TEST(TuneQuantCase, TheReferenceCheckCatchesAVariantThatReadsTheLayoutWrong) {
  Backend be = cpu_backend();
  Backend ref = cpu_backend();
  const int64_t T = 4, K = 256, N = 96;
  struct Case {
    int32_t dtype;
    QuantLayout layout;
  };
  const Case cases[] = {{NINFER_DTYPE_INT4, {NINFER_DTYPE_F16, true, true, 32}},
                        {NINFER_DTYPE_INT4, {NINFER_DTYPE_BF16, false, false, 64}},
                        {NINFER_DTYPE_INT8, {NINFER_DTYPE_BF16, true, false, 32}},
                        {NINFER_DTYPE_FP8_E4M3, {NINFER_DTYPE_F32, false, false, 128}}};
  const Fault faults[] = {
      {"scales read as another dtype",
       [](ninfer_quant_weight& q) { q.scale_dtype = q.scale_dtype == NINFER_DTYPE_BF16 ? NINFER_DTYPE_F16 : NINFER_DTYPE_BF16; }},
      {"zero points ignored", [](ninfer_quant_weight& q) { q.zeros = nullptr; }},
      {"g_idx ignored", [](ninfer_quant_weight& q) { q.g_idx = nullptr; }},
      {"groups twice as wide", [](ninfer_quant_weight& q) { q.group_size *= 2; }},
  };
  for (const char* op : {NINFER_OP_LINEAR, NINFER_OP_NORM_LINEAR})
    for (const Case& c : cases) {
      const std::string what = std::string(op) + " " + ninfer_dtype_name(c.dtype) + " " + c.layout.describe();
      const int64_t dims2 = std::string(op) == NINFER_OP_LINEAR ? (c.layout.g_idx ? 0 : c.layout.group_size) : 1;
      const ninfer_shape shape{T, {K, N, dims2, 0}, c.dtype};
      auto oc = make_op_case(be, shape, c.layout, op, T, 1 << 20, 42);
      ASSERT_TRUE(oc) << what;
      ASSERT_EQ(oc->shape(T).dtype, c.dtype) << what;
      const char* variant = std::string(op) == NINFER_OP_LINEAR ? "blocked" : "reference";
      be.run_variant(op, variant, oc->shape(T), oc->args(T, 0));
      // The same plugin on the same codes: equal up to the summation order of fewer rows.
      EXPECT_LE(oc->error_vs_reference(ref, T), 1e-6) << what;
      for (const Fault& f : faults) {
        const void* args = oc->args(T, 0);
        ninfer_quant_weight wq{};
        ninfer_linear_args la{};
        ninfer_norm_linear_args na{};
        const void* bad = nullptr;
        if (std::string(op) == NINFER_OP_LINEAR) {
          la = *static_cast<const ninfer_linear_args*>(args);
          wq = *la.wq;
          la.wq = &wq;
          bad = &la;
        } else {
          na = *static_cast<const ninfer_norm_linear_args*>(args);
          wq = *na.wq;
          na.wq = &wq;
          bad = &na;
        }
        const ninfer_quant_weight right = wq;
        f.apply(wq);
        if (wq.scale_dtype == right.scale_dtype && wq.zeros == right.zeros && wq.g_idx == right.g_idx &&
            wq.group_size == right.group_size)
          continue; // this layout has nothing for the fault to drop
        try {
          be.run_variant(op, variant, oc->shape(T), bad);
        } catch (const Error&) {
          continue; // refused outright (a g_idx past the wider groups' count): caught as well
        }
        const double err = oc->error_vs_reference(ref, T);
        EXPECT_GT(err, 5 * OpCase::kTolerance) << what << ": " << f.what;
        std::printf("%s, %s: relative L2 %.3g\n", what.c_str(), f.what, err);
      }
    }
}
