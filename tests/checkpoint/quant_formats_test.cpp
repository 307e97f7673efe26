// Each published quantized layout, written by the test from its definition (quant_layouts.cpp)
// with fresh random codes, zero points, scales and g_idx: the loader's canonical matrix, run
// through the CPU plugin's linear, must give x · W^T of the float64 weights the format's own
// formula gives; its dequantize() must give those weights. Bit widths 4 and 8, several group
// sizes (dividing K, not dividing it, one per row), GPTQ v1 and v2, symmetric and not, act-order
// g_idx, F16 / BF16 / F32 scales, FP8 blocks that divide neither N nor K.
#include <gtest/gtest.h>

#include <cmath>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/checkpoint/quantized_tensors.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "quant_layouts.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using test::LayoutCase;
using test::PackedModule;

const std::string kModule = "model.layers.0.mlp.gate_proj";

int32_t abi_dtype(QuantCodes c) {
  return c == QuantCodes::Int4 ? NINFER_DTYPE_INT4 : c == QuantCodes::Int8 ? NINFER_DTYPE_INT8 : NINFER_DTYPE_FP8_E4M3;
}
int32_t abi_dtype(DType d) {
  return d == DType::F32 ? NINFER_DTYPE_F32 : d == DType::BF16 ? NINFER_DTYPE_BF16 : NINFER_DTYPE_F16;
}

// Loads the packed module and checks it against the definition's weights.
void check_layout(const PackedModule& p, const LayoutCase& c, std::mt19937_64& rng) {
  SCOPED_TRACE(c.describe());
  test::TempDir dir;
  test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
  const Checkpoint ck = Checkpoint::open(dir.path());
  const auto m = find_quantized(ck, kModule + ".weight");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->rows, c.N);
  EXPECT_EQ(m->cols, c.K);
  const QuantizedMatrix q = read_quantized(ck, *m);

  // dequantize(): W exactly where the product is exact in float32, else within its one rounding.
  const std::vector<float> w = q.dequantize();
  ASSERT_EQ(w.size(), p.weights.size());
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_LE(std::fabs(w[i] - p.weights[i]), std::fabs(p.weights[i]) * 0x1p-24) << "weight " << i;

  // linear on the CPU plugin with the canonical matrix.
  const LoadedPlugin* cpu = test::build_plugins().find("cpu");
  ASSERT_NE(cpu, nullptr);
  Backend be(*cpu, host_device());
  const int64_t T = 3;
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(T * c.K)), y(static_cast<size_t>(T * c.N), NAN);
  for (auto& v : x) v = d(rng);
  const ninfer_quant_weight wq{q.scales.data(), q.zeros.empty() ? nullptr : q.zeros.data(),
                               q.g_idx.empty() ? nullptr : q.g_idx.data(), abi_dtype(q.scale_dtype),
                               static_cast<int32_t>(q.group_size)};
  const int32_t dtype = abi_dtype(q.codes_type);
  const ninfer_linear_args a{x.data(), c.K, q.codes.data(), y.data(), c.N, T, c.K, c.N, dtype, 0, &wq};
  be.run(NINFER_OP_LINEAR, {T, {c.K, c.N, 0, 0}, dtype}, &a);
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t)
    for (int32_t n = 0; n < c.N; ++n) {
      double acc = 0;
      for (int32_t k = 0; k < c.K; ++k) acc += double(x[t * c.K + k]) * p.weights[static_cast<size_t>(n) * c.K + k];
      want.push_back(acc);
    }
  const test::Mismatch mm = test::compare(y, want, test::kFloat32Exact);
  EXPECT_TRUE(mm.ok) << mm.describe();
}

TEST(QuantLayouts, GptqMatchesItsDefinition) {
  auto rng = test::fresh_rng("gptq layouts");
  for (int32_t bits : {4, 8})
    for (int32_t group : {32, 48, -1})
      for (bool v2 : {false, true})
        for (bool sym : {true, false})
          for (bool act_order : {false, true})
            for (const char* sd : {"F16", "BF16", "F32"}) {
              if (group < 0 && act_order) continue; // one group: nothing to reorder
              LayoutCase c;
              c.N = 24;
              c.K = 96;
              c.bits = bits;
              c.group = group;
              c.gptq_v2 = v2;
              c.symmetric = sym;
              c.act_order = act_order;
              c.scale_dtype = sd;
              check_layout(test::pack_gptq(rng, c, kModule), c, rng);
              if (HasFatalFailure()) return;
            }
}

// K = 128: whole 8 x 8 nibble tiles of 5 word columns; K = 101: 12 tiles and 5 inputs past them
// (read code by code).
TEST(QuantLayouts, AwqMatchesItsDefinition) {
  auto rng = test::fresh_rng("awq layouts");
  for (int32_t K : {128, 101})
    for (int32_t group : {32, 64, -1})
      for (const char* sd : {"F16", "BF16"}) {
        LayoutCase c;
        c.N = 40;
        c.K = K;
        c.group = group;
        c.symmetric = false;
        c.scale_dtype = sd;
        check_layout(test::pack_awq(rng, c, kModule), c, rng);
        if (HasFatalFailure()) return;
      }
}

TEST(QuantLayouts, CompressedTensorsMatchesItsDefinition) {
  auto rng = test::fresh_rng("compressed-tensors layouts");
  for (int32_t bits : {4, 8})
    for (int32_t group : {32, 16, -1})
      for (bool sym : {true, false})
        for (bool act_order : {false, true})
          for (const char* sd : {"BF16", "F16", "F32"})
            for (int32_t K : {70, 69}) {
              if (group < 0 && act_order) continue;
              LayoutCase c;
              c.N = 21; // zero points of 21 outputs leave the last int32 word part-filled
              c.K = K;  // and so do 70 or 69 codes along K (69: a row of int4 codes ends mid-byte)
              c.bits = bits;
              c.group = group;
              c.symmetric = sym;
              c.act_order = act_order;
              c.scale_dtype = sd;
              check_layout(test::pack_compressed_tensors(rng, c, kModule), c, rng);
              if (HasFatalFailure()) return;
            }
}

TEST(QuantLayouts, Fp8BlockMatchesItsDefinition) {
  auto rng = test::fresh_rng("fp8 block layouts");
  for (auto [bn, bk] : {std::pair{32, 32}, {16, 24}, {128, 128}})
    for (const char* sd : {"F32", "BF16", "F16"}) {
      LayoutCase c;
      c.N = 40; // blocks of 32 or 16 rows and 24 or 32 columns divide neither
      c.K = 70;
      c.bits = 8;
      c.block_rows = bn;
      c.block_cols = bk;
      c.scale_dtype = sd;
      check_layout(test::pack_fp8_block(rng, c, kModule), c, rng);
      if (HasFatalFailure()) return;
    }
}

// Qwen3.5's multimodal layout keeps quantization_config under text_config.
TEST(QuantLayouts, QuantizationConfigUnderTextConfigIsRead) {
  auto rng = test::fresh_rng("nested quantization_config");
  test::TempDir dir;
  test::copy_fixture_config("tiny-qwen3_5-vl-layout", dir.path());
  LayoutCase c;
  c.N = 24;
  c.K = 64;
  const std::string module = "model.language_model.layers.0.mlp.gate_proj";
  const PackedModule p = test::pack_gptq(rng, c, module);
  nlohmann::json cfg = test::read_json(dir / "config.json");
  cfg["text_config"]["quantization_config"] = p.config;
  test::write_json(dir / "config.json", cfg);
  test::write_raw_safetensors(dir / "model.safetensors", p.tensors);
  const Checkpoint ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.config().quantization.has_value());
  EXPECT_EQ(ck.config().quantization->key, "text_config.quantization_config");
  const auto m = find_quantized(ck, module + ".weight");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->method, QuantMethod::Gptq);
}

} // namespace
} // namespace ninfer
