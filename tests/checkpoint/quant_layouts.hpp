// The published quantized layouts written from their definitions (tests/fixtures/quant/README.md),
// independently of core/checkpoint: a random quantized matrix, its float64 weights W[n, k] from
// the format's own formula, and the tensors a GPTQ / AWQ / compressed-tensors / FP8 tool writes
// for it. Shared by the layout tests and the error tests.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "raw_safetensors.hpp"

namespace ninfer::test {

struct LayoutCase {
  int32_t N = 0, K = 0, bits = 4;
  int32_t group = 32; // -1: one group per row
  std::string scale_dtype = "F16"; // F16, BF16, F32
  bool symmetric = true;
  bool gptq_v2 = false;
  bool act_order = false; // a shuffled g_idx
  int32_t block_rows = 0, block_cols = 0; // FP8

  int32_t groups() const { return group > 0 ? (K + group - 1) / group : 1; }
  int32_t group_of(int32_t k) const { return group > 0 ? k / group : 0; }
  std::string describe() const;
};

// What a test writes and what the loader must make of it.
struct PackedModule {
  RawTensors tensors;          // under "<module>.": qweight, scales, ...
  nlohmann::json config;       // quantization_config
  std::vector<double> weights; // W [N, K], float64, from the format's definition
};

PackedModule pack_gptq(std::mt19937_64& rng, const LayoutCase& c, const std::string& module);
PackedModule pack_awq(std::mt19937_64& rng, const LayoutCase& c, const std::string& module);
PackedModule pack_compressed_tensors(std::mt19937_64& rng, const LayoutCase& c, const std::string& module);
PackedModule pack_fp8_block(std::mt19937_64& rng, const LayoutCase& c, const std::string& module);

// A checkpoint folder: tiny-qwen3's config.json with `quantization_config`, and a
// model.safetensors holding `tensors` only.
void write_quantized_checkpoint(const std::filesystem::path& dir, const nlohmann::json& quantization_config,
                                const RawTensors& tensors);

// Raw tensor builders.
RawTensor i32_tensor(std::vector<int64_t> shape, const std::vector<uint32_t>& words);

} // namespace ninfer::test
