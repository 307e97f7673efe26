// Quantized codes in tiles (NINFER_QUANT_LAYOUT_TILES16, ninfer/abi/ops/quant_weight.h) through
// the loader, on the CPU plugin, which reads both layouts: Backend::code_layout picks tiles where
// the one-token route reads them and the shape allows, and NINFER_CODE_TILES=0 keeps rows;
// codes_in_tiles moves each byte where the contract's formula puts it (QuantWeightCase::tiled_codes
// places code by code); and the trained demo model quantized to int4 gives the same logits, bit
// for bit, with its codes in tiles and in rows (quantize_round_trip_test checks the rows against
// float twins).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "model_test_env.hpp"
#include "ninfer/abi/ops/quant_weight.h"
#include "ninfer/support/error.hpp"
#include "quant_twin.hpp"
#include "quant_weight_case.hpp"
#include "random_source.hpp"
#include "weights.hpp"

using namespace ninfer;
using namespace ninfer::test;
namespace fs = std::filesystem;

namespace {

// NINFER_CODE_TILES set for the scope of one object, unset after.
struct CodeTilesOff {
  CodeTilesOff() { setenv("NINFER_CODE_TILES", "0", 1); }
  ~CodeTilesOff() { unsetenv("NINFER_CODE_TILES"); }
};

} // namespace

TEST(CodeTiles, LayoutFollowsTheDecodeRouteAndTheShape) {
  Backend be = cpu_model_backend();
  EXPECT_EQ(be.code_layout(256, 384, 128, NINFER_DTYPE_INT4), NINFER_QUANT_LAYOUT_TILES16);
  EXPECT_EQ(be.code_layout(384, 256, 0, NINFER_DTYPE_INT8), NINFER_QUANT_LAYOUT_TILES16); // g_idx: groups, not codes
  EXPECT_EQ(be.code_layout(256, 32, 256, NINFER_DTYPE_FP8_E4M3), NINFER_QUANT_LAYOUT_TILES16);
  EXPECT_EQ(be.code_layout(64, 160, 32, NINFER_DTYPE_INT4), NINFER_QUANT_LAYOUT_ROWS);   // K not whole pieces
  EXPECT_EQ(be.code_layout(256, 40, 128, NINFER_DTYPE_INT4), NINFER_QUANT_LAYOUT_ROWS);  // N not whole bands
  EXPECT_EQ(be.code_layout(256, 384, 0, NINFER_DTYPE_BF16), NINFER_QUANT_LAYOUT_ROWS);   // float weights
  const CodeTilesOff off;
  EXPECT_EQ(be.code_layout(256, 384, 128, NINFER_DTYPE_INT4), NINFER_QUANT_LAYOUT_ROWS);
}

TEST(CodeTiles, LoaderMovesEachByteWhereTheContractPutsIt) {
  auto rng = fresh_rng("code tiles, loader bytes");
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3}) {
    const QuantWeightCase c = QuantWeightCase::random(rng, dtype, 48, 384, 128, NINFER_DTYPE_BF16, false, false);
    EXPECT_EQ(models::codes_in_tiles(c.codes, c.N, c.row_bytes(), dtype), c.tiled_codes()) << c.describe();
  }
  const QuantWeightCase odd = QuantWeightCase::random(rng, NINFER_DTYPE_INT4, 40, 256, 128, NINFER_DTYPE_BF16, false, false);
  EXPECT_THROW(models::codes_in_tiles(odd.codes, odd.N, odd.row_bytes(), NINFER_DTYPE_INT4), Error);
}

// The demo model's projections (hidden 256, intermediate 384) are all whole tiles.
TEST(CodeTiles, AQuantizedModelGivesTheSameLogitsInTilesAndInRows) {
  const fs::path demo = source_dir() / "models" / "qwen3_5-demo";
  TempDir tmp;
  const ProcessOutput r =
      run_quantize({"--checkpoint", demo.string(), "--out", (tmp / "out").string(), "--bits", "4", "-q"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Checkpoint quantized = Checkpoint::open(tmp / "out");
  auto rng = fresh_rng("code tiles, demo model");
  const int64_t vocab = quantized.config().vocab_size;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> prompt(40);
  for (auto& id : prompt) id = token(rng);
  auto logits = [&](bool tiles) {
    std::optional<CodeTilesOff> off;
    if (!tiles) off.emplace();
    Backend be = cpu_model_backend();
    EXPECT_EQ(be.code_layout(256, 768, 128, NINFER_DTYPE_INT4),
              tiles ? NINFER_QUANT_LAYOUT_TILES16 : NINFER_QUANT_LAYOUT_ROWS);
    auto lm = CausalLM::load(quantized, be, quant_twin_options());
    std::vector<float> out = lm->prefill(0, prompt, LogitsFor::All);
    const std::vector<float> step = decode_logits(*lm, std::vector<int32_t>{0}, std::vector<int32_t>{prompt.front()});
    out.insert(out.end(), step.begin(), step.end());
    return out;
  };
  const std::vector<float> tiled = logits(true), rows = logits(false);
  ASSERT_EQ(tiled.size(), rows.size());
  ASSERT_EQ(tiled.size(), static_cast<size_t>((prompt.size() + 1) * vocab));
  size_t differ = 0;
  for (size_t i = 0; i < tiled.size(); ++i) differ += std::memcmp(&tiled[i], &rows[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << "logits of the int4 demo model differ between codes in tiles and in rows";
}
