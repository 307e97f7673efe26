// Bad quantized checkpoints: every refusal is an ninfer::Error naming the file, the key or
// tensor (or module), and the problem. Formats ninfer does not read, shapes the packing cannot
// hold, truncated and mistyped packed tensors, g_idx out of range, config and weights that
// disagree.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"
#include "ninfer/support/error.hpp"
#include "quant_layouts.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using test::LayoutCase;
using test::PackedModule;

const std::string kModule = "model.layers.0.mlp.gate_proj";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The message of opening DIR and reading kModule's packed tensors.
std::string load_error(const std::filesystem::path& dir) {
  return error_of([&] {
    const Checkpoint ck = Checkpoint::open(dir);
    if (const auto m = find_quantized(ck, kModule + ".weight")) (void)read_quantized(ck, *m);
  });
}

void expect_mentions(const std::string& msg, std::initializer_list<std::string> parts) {
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
}

PackedModule gptq4(std::mt19937_64& rng, int32_t N = 24, int32_t K = 64) {
  LayoutCase c;
  c.N = N;
  c.K = K;
  return test::pack_gptq(rng, c, kModule);
}

// A config-only checkpoint with `q` as quantization_config.
std::string config_error(const nlohmann::json& q) {
  test::TempDir dir;
  test::write_quantized_checkpoint(dir.path(), q, {});
  return error_of([&] { (void)Checkpoint::open(dir.path()); });
}

TEST(QuantErrors, FormatsNinferDoesNotReadAreNamedWithTheSupportedOnes) {
  const std::string nvfp4 = config_error({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}});
  expect_mentions(nvfp4, {"config.json", "quantization_config.quant_method", "modelopt", "NVFP4", "gptq", "awq",
                          "compressed-tensors", "fp8"});
  expect_mentions(config_error({{"quant_method", "exl2"}}), {"exl2", "ExLlama", "gptq"});
  expect_mentions(config_error({{"quant_method", "gguf"}}), {"gguf", "GGUF"});
  expect_mentions(config_error({{"quant_method", "gptq"}, {"bits", 3}, {"group_size", 128}}),
                  {"config.json", "quantization_config.bits", "is 3", "4 or 8"});
  expect_mentions(config_error({{"quant_method", "gptq"}, {"bits", 2}, {"group_size", 128}}), {"bits", "is 2"});
  expect_mentions(config_error({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}}),
                  {"quantization_config.version", "gemv", "gemm"});
  expect_mentions(config_error({{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}}),
                  {"quantization_config.weight_block_size", "per-tensor"});
  expect_mentions(config_error({{"quant_method", "compressed-tensors"}, {"format", "nvfp4-pack-quantized"}}),
                  {"quantization_config.format", "nvfp4-pack-quantized", "pack-quantized"});
  expect_mentions(config_error({{"quant_method", "gptq"}, {"bits", 4}, {"checkpoint_format", "marlin"}}),
                  {"checkpoint_format", "marlin"});
}

TEST(QuantErrors, AShapeThePackingCannotHoldNamesTheTensor) {
  auto rng = test::fresh_rng("quant errors: packing");
  test::TempDir dir;
  PackedModule p = gptq4(rng);
  // 20 outputs: the zero points of 8 outputs share an int32 word, so 20 cannot be packed.
  p.tensors[kModule + ".qweight"] = test::i32_tensor({8, 20}, std::vector<uint32_t>(160, 0));
  test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
  expect_mentions(load_error(dir.path()), {"model.safetensors", kModule + ".qweight", "N = 20", "multiple of 8"});
}

TEST(QuantErrors, ATruncatedPackedTensorNamesTheTensorAndBothShapes) {
  auto rng = test::fresh_rng("quant errors: truncated");
  test::TempDir dir;
  PackedModule p = gptq4(rng);
  // One group of zero points short of K = 64 in groups of 32.
  p.tensors[kModule + ".qzeros"] = test::i32_tensor({1, 3}, {0, 0, 0});
  test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
  expect_mentions(load_error(dir.path()), {"model.safetensors", kModule + ".qzeros", "[1, 3]", "[2, 3]"});

  test::TempDir ct_dir;
  LayoutCase c;
  c.N = 16;
  c.K = 64;
  PackedModule ct = test::pack_compressed_tensors(rng, c, kModule);
  ct.tensors[kModule + ".weight_packed"] = test::i32_tensor({16, 7}, std::vector<uint32_t>(16 * 7, 0));
  test::write_quantized_checkpoint(ct_dir.path(), ct.config, ct.tensors);
  expect_mentions(load_error(ct_dir.path()), {"model.safetensors", kModule + ".weight_packed", "[16, 7]", "[16, 8]"});
}

TEST(QuantErrors, AWrongDtypeNamesTheTensorAndTheDtypes) {
  auto rng = test::fresh_rng("quant errors: dtype");
  test::TempDir dir;
  PackedModule p = gptq4(rng);
  p.tensors[kModule + ".scales"] = test::i32_tensor({2, 24}, std::vector<uint32_t>(48, 0));
  test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
  expect_mentions(load_error(dir.path()), {"model.safetensors", kModule + ".scales", "dtype I32", "F16"});
}

TEST(QuantErrors, GIdxOutOfRangeNamesTheTensorAndTheEntry) {
  auto rng = test::fresh_rng("quant errors: g_idx");
  test::TempDir dir;
  PackedModule p = gptq4(rng);
  std::vector<uint32_t> g(64, 0);
  g[37] = 2; // K = 64 in groups of 32: groups 0 and 1
  p.tensors[kModule + ".g_idx"] = test::i32_tensor({64}, g);
  test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
  expect_mentions(load_error(dir.path()), {"model.safetensors", kModule + ".g_idx", "entry 37", "outside"});
}

TEST(QuantErrors, AnEightBitV1ZeroPointOf256IsRefused) {
  auto rng = test::fresh_rng("quant errors: v1 zero");
  test::TempDir dir;
  LayoutCase c;
  c.N = 8;
  c.K = 64;
  c.bits = 8;
  PackedModule p = test::pack_gptq(rng, c, kModule);
  p.tensors[kModule + ".qzeros"] = test::i32_tensor({2, 2}, {0xffffffffu, 0, 0, 0});
  test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
  expect_mentions(load_error(dir.path()), {"model.safetensors", kModule + ".qzeros", "zero point of 256"});
}

TEST(QuantErrors, ConfigAndWeightsThatDisagreeNameTheModule) {
  auto rng = test::fresh_rng("quant errors: disagreement");
  PackedModule p = gptq4(rng);
  {  // dynamic excludes the module, yet it is packed
    test::TempDir dir;
    nlohmann::json cfg = p.config;
    cfg["dynamic"] = {{"-:.*gate_proj", nlohmann::json::object()}};
    test::write_quantized_checkpoint(dir.path(), cfg, p.tensors);
    expect_mentions(load_error(dir.path()), {"model.safetensors", kModule, "unquantized", "quantization_config"});
  }
  {  // packed tensors, no quantization_config
    test::TempDir dir;
    test::write_quantized_checkpoint(dir.path(), nullptr, p.tensors);
    expect_mentions(load_error(dir.path()), {"model.safetensors", kModule, "qweight", "no quantization_config"});
  }
  {  // the config says AWQ, the tensors are compressed-tensors
    test::TempDir dir;
    LayoutCase c;
    c.N = 16;
    c.K = 64;
    const PackedModule ct = test::pack_compressed_tensors(rng, c, kModule);
    test::write_quantized_checkpoint(dir.path(), {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}}, ct.tensors);
    expect_mentions(load_error(dir.path()), {"model.safetensors", kModule, "weight_packed", "quant_method awq"});
  }
  {  // AWQ modules_to_not_convert names the module (by a part of its name)
    test::TempDir dir;
    LayoutCase c;
    c.N = 16;
    c.K = 64;
    PackedModule awq = test::pack_awq(rng, c, kModule);
    awq.config["modules_to_not_convert"] = {"gate_proj"};
    test::write_quantized_checkpoint(dir.path(), awq.config, awq.tensors);
    expect_mentions(load_error(dir.path()), {kModule, "unquantized"});
  }
}

// GPTQ `dynamic` rules apply in config.json's order, the first a module matches deciding (as
// GPTQModel and vLLM read them): an exclusion written before an override of the same packed
// module excludes it (the load names the contradiction); written after, the override decides.
TEST(QuantErrors, GptqDynamicRulesApplyInTheFilesOrder) {
  auto rng = test::fresh_rng("quant errors: dynamic order");
  const PackedModule p = gptq4(rng);
  for (const bool exclusion_first : {true, false}) {
    test::TempDir dir;
    test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
    const nlohmann::ordered_json exclude = nlohmann::ordered_json::object(), four_bits = {{"bits", 4}};
    nlohmann::ordered_json rules = nlohmann::ordered_json::object();
    if (exclusion_first) rules["-:.*gate_proj"] = exclude;
    rules["+:.*gate_proj"] = four_bits;
    if (!exclusion_first) rules["-:.*gate_proj"] = exclude;
    std::ifstream in(dir.path() / "config.json");
    nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
    cfg["quantization_config"]["dynamic"] = rules;
    std::ofstream(dir.path() / "config.json") << cfg.dump(2);
    const std::string msg = load_error(dir.path());
    if (exclusion_first) expect_mentions(msg, {kModule, "unquantized", "quantization_config"});
    else EXPECT_EQ(msg, "(no error)");
  }
}

// compressed-tensors config groups are tried in config.json's order too: where two groups name
// one module, the first decides (as compressed-tensors matches). The group written first here is
// named after the other (`z_` before `a_`), so a reader that sorted the names would take the
// 8-bit group for 4-bit tensors and refuse their shapes.
TEST(QuantErrors, CompressedTensorsGroupsApplyInTheFilesOrder) {
  auto rng = test::fresh_rng("quant errors: config_groups order");
  LayoutCase c;
  c.N = 16;
  c.K = 64;
  const PackedModule p = test::pack_compressed_tensors(rng, c, kModule);
  for (const bool packed_group_first : {true, false}) {
    test::TempDir dir;
    test::write_quantized_checkpoint(dir.path(), p.config, p.tensors);
    std::ifstream in(dir.path() / "config.json");
    nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
    nlohmann::ordered_json& q = cfg["quantization_config"];
    nlohmann::ordered_json packed = q["config_groups"]["group_0"], eight_bits = packed;
    packed["targets"] = {"re:.*gate_proj$"};
    eight_bits["targets"] = {"re:.*gate_proj$"};
    eight_bits["weights"]["num_bits"] = 8;
    nlohmann::ordered_json groups = nlohmann::ordered_json::object();
    groups[packed_group_first ? "z_packed" : "a_eight_bits"] = packed_group_first ? packed : eight_bits;
    groups[packed_group_first ? "a_eight_bits" : "z_packed"] = packed_group_first ? eight_bits : packed;
    q["config_groups"] = groups;
    std::ofstream(dir.path() / "config.json") << cfg.dump(2);
    const std::string msg = load_error(dir.path());
    if (packed_group_first) EXPECT_EQ(msg, "(no error)");
    else expect_mentions(msg, {kModule, "weight_packed"});
  }
}

// require_all checks a packed module against the shape config.json gives.
TEST(QuantErrors, APackedModuleOfTheWrongShapeFailsTheCheckpointCheck) {
  auto rng = test::fresh_rng("quant errors: require_all");
  test::TempDir dir;
  test::copy_fixture_config("tiny-qwen3", dir.path());
  test::RawTensors raw = test::read_raw_safetensors(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors");
  raw.erase(kModule + ".weight");
  const PackedModule p = gptq4(rng, /*N=*/24, /*K=*/64); // gate_proj is [160, 64]
  for (const auto& [name, t] : p.tensors) raw[name] = t;
  nlohmann::json cfg = test::read_json(dir / "config.json");
  cfg["quantization_config"] = p.config;
  test::write_json(dir / "config.json", cfg);
  test::write_raw_safetensors(dir / "model.safetensors", raw);
  const Checkpoint ck = Checkpoint::open(dir.path());
  expect_mentions(error_of([&] { require_all(ck); }), {kModule, "gptq", "[24, 64]", "[160, 64]"});
  EXPECT_TRUE(unrecognised_tensors(ck).empty()) << "the packed tensors are the module's";
}

} // namespace
} // namespace ninfer
