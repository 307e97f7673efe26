// ninfer-quantize end to end: the real tool on fresh random weights shaped like each fixture
// (Qwen3, Qwen3.5, Qwen3.5's multimodal layout), every format, bit width and source dtype.
// What it writes is read back by the tests' own float64 oracle (quant_oracle.cpp):
//   (a) every dequantized weight lies within half a quantization step of the original;
//   (b) packed words and scales equal the oracle's own quantize-and-pack bit for bit;
//   (c) the folder is a valid checkpoint (config, quantization_config, index, side files);
//   (d) every tensor left unquantized is copied bit for bit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <regex>
#include <set>

#include "quant_oracle.hpp"
#include "random_source.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RawTensors;

// q·s against w: the quotient w / s is formed in float64, so a weight on a rounding tie may land
// on either side by one ulp of the quotient.
constexpr double kHalfStepSlack = 1e-12;

// The modules the default recipe quantizes, by name alone (docs/ninfer-quantize.md): every
// decoder-layer linear except the Gated DeltaNet in_proj_a / in_proj_b; never lm_head.
bool quantized_by_default(const std::string& name, const std::string& prefix) {
  static const std::regex layer_linear(
      R"(layers\.\d+\.(self_attn\.(q|k|v|o)_proj|linear_attn\.(in_proj_qkv|in_proj_z|out_proj)|mlp\.(gate|up|down)_proj)\.weight)");
  return name.rfind(prefix, 0) == 0 && std::regex_match(name.substr(prefix.size()), layer_linear);
}

std::string module_of(const std::string& weight) { return weight.substr(0, weight.size() - 7); }

struct Case {
  std::string fixture;
  std::string format;  // "compressed-tensors" or "gptq"
  std::string dtype;   // source dtype
  int bits = 4;
  int64_t group = 32;  // -1: per output channel
  bool sharded_input = false;
  std::string max_shard = "4GB";
};

std::string describe(const Case& c) {
  return fmt::format("{} {} from {} int{} group {}{}", c.fixture, c.format, c.dtype, c.bits, c.group,
                     c.sharded_input ? " (sharded input)" : "");
}

// Python's re.match: the pattern must match at the start of the name (not necessarily all of it).
bool re_match(const std::string& pattern, const std::string& name) {
  return std::regex_search(name, std::regex(pattern), std::regex_constants::match_continuous);
}

void check_quantization_config(const Case& c, const json& q, const std::set<std::string>& unquantized_linears,
                               const std::set<std::string>& quantized) {
  if (c.format == "compressed-tensors") {
    EXPECT_EQ(q["quant_method"], "compressed-tensors");
    EXPECT_EQ(q["format"], "pack-quantized");
    EXPECT_EQ(q["quantization_status"], "compressed");
    ASSERT_EQ(q["config_groups"].size(), 1u);
    const json& g = q["config_groups"]["group_0"];
    EXPECT_EQ(g["targets"], json::array({"Linear"}));
    EXPECT_EQ(g["weights"]["num_bits"], c.bits);
    EXPECT_EQ(g["weights"]["type"], "int");
    EXPECT_EQ(g["weights"]["symmetric"], true);
    EXPECT_EQ(g["weights"]["strategy"], c.group == -1 ? "channel" : "group");
    if (c.group == -1) EXPECT_TRUE(g["weights"]["group_size"].is_null());
    else EXPECT_EQ(g["weights"]["group_size"], c.group);
    EXPECT_EQ(q["ignore"].get<std::set<std::string>>(), unquantized_linears);
  } else {
    EXPECT_EQ(q["quant_method"], "gptq");
    EXPECT_EQ(q["checkpoint_format"], "gptq");
    EXPECT_EQ(q["bits"], c.bits);
    EXPECT_EQ(q["group_size"], c.group);
    EXPECT_EQ(q["sym"], true);
    EXPECT_EQ(q["desc_act"], false);
    EXPECT_EQ(q["lm_head"], false);
    // The -: rules of `dynamic` must exclude every unquantized decoder linear and no quantized one.
    auto excluded = [&](const std::string& module) {
      for (const auto& [key, _] : q["dynamic"].items())
        if (key.rfind("-:", 0) == 0 && re_match(key.substr(2), module)) return true;
      return false;
    };
    for (const auto& m : unquantized_linears)
      if (m != "lm_head") EXPECT_TRUE(excluded(m)) << m << " is not excluded by " << q["dynamic"].dump();
    for (const auto& m : quantized) EXPECT_FALSE(excluded(m)) << m << " is excluded by " << q["dynamic"].dump();
  }
}

void check_case(const Case& c, std::mt19937_64& rng) {
  SCOPED_TRACE(describe(c));
  test::TempDir tmp;
  const auto src = test::make_source_checkpoint(c.fixture, c.dtype, rng, tmp / "in", c.sharded_input);
  const fs::path out = tmp / "out";
  const auto r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", out.string(), "--format", c.format,
                                     "--bits", std::to_string(c.bits), "--group-size", std::to_string(c.group),
                                     "--max-shard-size", c.max_shard, "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json in_config = src.config;
  const json out_config = test::read_json(out / "config.json");
  const std::string prefix = in_config.contains("text_config") ? "model.language_model." : "model.";

  // (c) config.json: the input's keys unchanged, plus quantization_config at the top level.
  json without = out_config;
  without.erase("quantization_config");
  EXPECT_EQ(without, in_config);
  for (const auto& f : test::side_files())
    EXPECT_EQ(test::read_file_bytes(out / f), test::read_file_bytes(src.dir / f)) << f;

  const RawTensors written = test::read_output_tensors(out);
  std::set<std::string> quantized, unquantized_linears, expected_names;
  for (const auto& [name, t] : src.tensors) {
    if (quantized_by_default(name, prefix)) {
      quantized.insert(module_of(name));
      for (const char* part : c.format == "gptq" ? std::vector<const char*>{".qweight", ".qzeros", ".scales", ".g_idx"}
                                                 : std::vector<const char*>{".weight_packed", ".weight_scale", ".weight_shape"})
        expected_names.insert(module_of(name) + part);
      continue;
    }
    expected_names.insert(name);
    // (d) copied bit for bit, dtype and shape included.
    ASSERT_TRUE(written.count(name)) << name << " is missing from the output";
    EXPECT_EQ(written.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(written.at(name).shape, t.shape) << name;
    EXPECT_TRUE(written.at(name).bytes == t.bytes) << name << " was not copied bit for bit";
    const bool linear = t.shape.size() == 2 && name.find("embed") == std::string::npos && name.size() > 7 &&
                        name.compare(name.size() - 7, 7, ".weight") == 0;
    if (linear) unquantized_linears.insert(module_of(name));
  }
  std::set<std::string> names;
  for (const auto& [n, _] : written) names.insert(n);
  EXPECT_EQ(names, expected_names);
  check_quantization_config(c, out_config["quantization_config"], unquantized_linears, quantized);

  const std::string scale_dtype = c.format == "gptq" ? "F16" : c.dtype;
  for (const auto& module : quantized) {
    SCOPED_TRACE(module);
    const test::RawTensor& w = src.tensors.at(module + ".weight");
    const std::vector<double> original = test::raw_values(w);
    const int64_t N = w.shape[0], K = w.shape[1], group = c.group == -1 ? K : c.group;
    const test::Dequantized d = c.format == "gptq" ? test::dequantize_gptq(written, module, c.bits)
                                                   : test::dequantize_compressed_tensors(written, module, c.bits);
    ASSERT_EQ(d.rows, N);
    ASSERT_EQ(d.cols, K);
    // (a) within half a step of the original.
    size_t bad = 0;
    for (size_t i = 0; i < original.size(); ++i)
      if (!(std::fabs(d.w[i] - original[i]) <= 0.5 * d.step[i] * (1 + kHalfStepSlack)) && bad++ < 3)
        ADD_FAILURE() << "element " << i << ": dequantized " << d.w[i] << ", original " << original[i] << ", step "
                      << d.step[i];
    EXPECT_EQ(bad, 0u);
    // (b) the oracle's own quantize-and-pack, bit for bit.
    const test::OracleQuant o = test::oracle_quantize(original, N, K, c.bits, group, scale_dtype);
    const std::vector<uint32_t> want = c.format == "gptq" ? test::oracle_pack_gptq_qweight(o)
                                                          : test::oracle_pack_compressed_tensors(o);
    const test::RawTensor& packed = written.at(module + (c.format == "gptq" ? ".qweight" : ".weight_packed"));
    ASSERT_EQ(packed.dtype, "I32");
    ASSERT_EQ(packed.bytes.size(), 4 * want.size());
    size_t diff = 0;
    for (size_t i = 0; i < want.size(); ++i) diff += test::raw_u32(packed, i) != want[i];
    EXPECT_EQ(diff, 0u) << "packed words differ from the oracle's";
    const test::RawTensor& scale = written.at(module + (c.format == "gptq" ? ".scales" : ".weight_scale"));
    EXPECT_EQ(scale.dtype, scale_dtype);
    const int64_t G = K / group;
    size_t scale_diff = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const size_t at = c.format == "gptq" ? static_cast<size_t>(g * N + n) : static_cast<size_t>(n * G + g);
        scale_diff += test::raw_value(scale, at) != o.scales[static_cast<size_t>(n * G + g)];
      }
    EXPECT_EQ(scale_diff, 0u) << "scales differ from the oracle's";
    if (c.format == "gptq") {
      const test::RawTensor& g_idx = written.at(module + ".g_idx");
      ASSERT_EQ(g_idx.dtype, "I32");
      for (int64_t k = 0; k < K; ++k) ASSERT_EQ(test::raw_value(g_idx, static_cast<size_t>(k)), k / group) << k;
    }
  }
}

TEST(NinferQuantize, EveryFixtureFormatAndSourceDtypeMatchesTheOracle) {
  auto rng = test::fresh_rng("NinferQuantize.EveryFixtureFormatAndSourceDtypeMatchesTheOracle");
  for (const char* fixture : {"tiny-qwen3", "tiny-qwen3_5", "tiny-qwen3_5-vl-layout"})
    for (const char* format : {"compressed-tensors", "gptq"})
      for (const char* dtype : {"BF16", "F16", "F32"}) check_case({fixture, format, dtype, 4, 32}, rng);
}

TEST(NinferQuantize, Int8GroupsAndPerChannelScales) {
  auto rng = test::fresh_rng("NinferQuantize.Int8GroupsAndPerChannelScales");
  for (const char* format : {"compressed-tensors", "gptq"}) {
    check_case({"tiny-qwen3_5", format, "BF16", 8, 16}, rng);
    check_case({"tiny-qwen3_5", format, "BF16", 8, -1}, rng);
    check_case({"tiny-qwen3", format, "F16", 4, -1}, rng);
  }
}

TEST(NinferQuantize, ShardedInputAndShardedOutput) {
  auto rng = test::fresh_rng("NinferQuantize.ShardedInputAndShardedOutput");
  Case c{"tiny-qwen3_5-vl-layout", "compressed-tensors", "BF16", 4, 32, true, "20KB"};
  check_case(c, rng);
  c.format = "gptq";
  check_case(c, rng);
}

// symmetric: false: a zero point per group (compressed-tensors weight_zero_point; GPTQ qzeros,
// stored minus one, so never 0), the config saying so, and every weight within half a step.
TEST(NinferQuantize, AsymmetricGridsKeepEveryWeightWithinHalfAStep) {
  auto rng = test::fresh_rng("NinferQuantize.AsymmetricGridsKeepEveryWeightWithinHalfAStep");
  for (const char* format : {"compressed-tensors", "gptq"})
    for (int bits : {4, 8}) {
      SCOPED_TRACE(fmt::format("{} int{}", format, bits));
      test::TempDir tmp;
      const auto src = test::make_source_checkpoint("tiny-qwen3_5", "BF16", rng, tmp / "in");
      test::write_file_bytes(tmp / "r.yaml", "symmetric: false\n");
      const auto r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", (tmp / "out").string(), "--recipe",
                                         (tmp / "r.yaml").string(), "--format", format, "--bits", std::to_string(bits),
                                         "--group-size", "32", "-q"});
      ASSERT_EQ(r.status, 0) << r.err;
      const json q = test::read_json(tmp / "out" / "config.json")["quantization_config"];
      const bool gptq = std::string(format) == "gptq";
      if (gptq) EXPECT_EQ(q["sym"], false);
      else EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["symmetric"], false);
      const RawTensors written = test::read_output_tensors(tmp / "out");
      int modules = 0, highest_zero = 0;
      for (const auto& [name, t] : src.tensors) {
        if (!quantized_by_default(name, "model.")) continue;
        const std::string module = module_of(name);
        SCOPED_TRACE(module);
        ++modules;
        EXPECT_EQ(written.count(module + ".weight_zero_point"), gptq ? 0u : 1u);
        const test::Dequantized d = gptq ? test::dequantize_gptq(written, module, bits)
                                         : test::dequantize_compressed_tensors(written, module, bits);
        const std::vector<double> original = test::raw_values(t);
        size_t bad = 0;
        for (size_t i = 0; i < original.size(); ++i)
          bad += !(std::fabs(d.w[i] - original[i]) <= 0.5 * d.step[i] * (1 + kHalfStepSlack));
        EXPECT_EQ(bad, 0u);
        if (gptq) {
          const test::RawTensor& qz = written.at(module + ".qzeros");
          for (size_t i = 0; i < qz.bytes.size() / 4; ++i)
            for (int j = 0; j < 32 / bits; ++j)
              highest_zero = std::max(highest_zero, static_cast<int>((test::raw_u32(qz, i) >> (bits * j)) & ((1u << bits) - 1)) + 1);
        }
      }
      EXPECT_GT(modules, 0);
      // A zero point of 0 would be stored as −1, which reads back as 2^bits.
      if (gptq) EXPECT_LE(highest_zero, (1 << bits) - 1);
    }
}

// (c) for a sharded output: the index names every tensor once, each in the shard that holds it,
// no shard holds a tensor the index does not name, and total_size is the sum of the data.
TEST(NinferQuantize, ShardIndexIsConsistent) {
  auto rng = test::fresh_rng("NinferQuantize.ShardIndexIsConsistent");
  test::TempDir tmp;
  const auto src = test::make_source_checkpoint("tiny-qwen3", "BF16", rng, tmp / "in");
  const auto r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", (tmp / "out").string(),
                                     "--group-size", "32", "--max-shard-size", "30KB"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("tensor"), std::string::npos) << "no progress on stderr: " << r.err;
  ASSERT_FALSE(fs::exists(tmp / "out" / "model.safetensors"));
  const json index = test::read_json(tmp / "out" / "model.safetensors.index.json");
  std::set<std::string> shard_files;
  for (const auto& e : fs::directory_iterator(tmp / "out"))
    if (e.path().extension() == ".safetensors") shard_files.insert(e.path().filename().string());
  ASSERT_GT(shard_files.size(), 2u);
  uint64_t total = 0;
  size_t listed = 0;
  for (const auto& f : shard_files) {
    EXPECT_TRUE(std::regex_match(f, std::regex(fmt::format(R"(model-\d{{5}}-of-{:05d}\.safetensors)", shard_files.size()))))
        << f;
    for (const auto& [name, t] : test::read_raw_safetensors(tmp / "out" / f)) {
      ASSERT_TRUE(index["weight_map"].contains(name)) << name;
      EXPECT_EQ(index["weight_map"][name], f) << name;
      total += t.bytes.size();
      ++listed;
    }
  }
  EXPECT_EQ(listed, index["weight_map"].size());
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
}

} // namespace
} // namespace ninfer
