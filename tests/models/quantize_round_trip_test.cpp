// What ninfer-quantize writes, ninfer's loaders read: fresh random float weights shaped like a
// fixture are quantized by the tool (each layout it writes, 4 and 8 bits, groups and one scale
// per output channel, roles with bits, groups or grids of their own, symmetric and asymmetric
// grids, round to nearest and GPTQ, GPTQ in act order with its g_idx), and the quantized folder
// is loaded and run on the CPU plugin beside a float32 twin made from the same output by the
// tests' own float64 reading of the published layout (tests/quantize/quant_oracle.cpp). Writer
// and reader agreeing with each other proves nothing alone; each agreeing with the oracle of the
// published layout does.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model_test_env.hpp"
#include "quant_oracle.hpp"
#include "quant_twin.hpp"
#include "random_source.hpp"
#include "raw_safetensors.hpp"

using namespace ninfer;
using namespace ninfer::test;
namespace fs = std::filesystem;

namespace {

struct RoundTrip {
  const char* fixture;
  const char* format; // ninfer-quantize --format
  int bits;
  int group; // -1: one scale per output channel
  const char* recipe = nullptr; // YAML; method gptq runs on a calibration text written here
};

void PrintTo(const RoundTrip& r, std::ostream* os) {
  *os << r.fixture << " " << r.format << " int" << r.bits << " group " << r.group << (r.recipe ? " " : "")
      << (r.recipe ? r.recipe : "");
}

// The twin: every tensor of the source, a quantized module's weight replaced by the oracle's
// dequantization of the tool's output (float32; exact: codes are small integers and the scales
// are stored in float16, bfloat16 or float32).
// The bits a module was written with, from its packed codes' width against the source's columns
// (a recipe may give a role its own bits).
int module_bits(const RawTensors& quantized, const std::string& module, int64_t cols, bool ct) {
  const RawTensor& packed = quantized.at(module + (ct ? ".weight_packed" : ".qweight"));
  return static_cast<int>(32 * (ct ? packed.shape[1] : packed.shape[0]) / cols);
}

RawTensors dequantized_twin(const RawTensors& source, const RawTensors& quantized, int* replaced) {
  RawTensors twin;
  for (const auto& [name, t] : source) {
    const std::string module = name.size() > 7 ? name.substr(0, name.size() - 7) : name;
    const bool ct = quantized.count(module + ".weight_packed") > 0, gptq = quantized.count(module + ".qweight") > 0;
    if (!ct && !gptq) {
      twin[name] = t;
      continue;
    }
    const int bits = module_bits(quantized, module, t.shape[1], ct);
    const Dequantized d = ct ? dequantize_compressed_tensors(quantized, module, bits) : dequantize_gptq(quantized, module, bits);
    RawTensor f{"F32", {d.rows, d.cols}, std::string(d.w.size() * 4, '\0')};
    for (size_t i = 0; i < d.w.size(); ++i) {
      const float v = static_cast<float>(d.w[i]);
      std::memcpy(f.bytes.data() + i * 4, &v, 4);
    }
    twin[name] = std::move(f);
    ++*replaced;
  }
  return twin;
}

class QuantizeRoundTrip : public testing::TestWithParam<RoundTrip> {};

TEST_P(QuantizeRoundTrip, LoadsWhatTheToolWritesAsTheOraclesTwin) {
  const RoundTrip& c = GetParam();
  const std::string what = fmt::format("round trip {} {} {}", c.fixture, c.format, c.bits);
  auto rng = fresh_rng(what.c_str());
  TempDir tmp;
  const SourceCheckpoint src = make_source_checkpoint(c.fixture, "BF16", rng, tmp / "in");
  std::vector<std::string> args{"--checkpoint", src.dir.string(), "--out", (tmp / "out").string(), "--format",
                                c.format, "--bits", std::to_string(c.bits), "--group-size", std::to_string(c.group),
                                "-q"};
  if (c.recipe) {
    std::ofstream(tmp / "recipe.yaml") << c.recipe;
    args.insert(args.end(), {"--recipe", (tmp / "recipe.yaml").string()});
    if (std::string(c.recipe).find("method: gptq") != std::string::npos) {
      write_byte_level_tokenizer(src.dir);
      std::ofstream(tmp / "calib.txt") << lexicon_text(rng, 800);
      args.insert(args.end(), {"--calibration", (tmp / "calib.txt").string(), "--calibration-tokens", "64",
                               "--calibration-samples", "8"});
    }
  }
  const ProcessOutput r = run_quantize(args);
  ASSERT_EQ(r.status, 0) << r.err;

  int replaced = 0;
  const RawTensors twin = dequantized_twin(src.tensors, read_output_tensors(tmp / "out"), &replaced);
  ASSERT_GT(replaced, 0) << "the tool quantized no projection";
  fs::create_directories(tmp / "twin");
  write_raw_safetensors(tmp / "twin" / "model.safetensors", twin);
  std::ofstream(tmp / "twin" / "config.json") << src.config.dump(2);

  const Checkpoint quantized = Checkpoint::open(tmp / "out");
  const Checkpoint float_twin = Checkpoint::open(tmp / "twin");
  ASSERT_TRUE(quantized.config().quantization.has_value());
  Backend be = cpu_model_backend();
  auto q_lm = CausalLM::load(quantized, be, quant_twin_options());
  auto t_lm = CausalLM::load(float_twin, be, quant_twin_options());
  expect_twin_outputs(*q_lm, *t_lm, quantized.config().vocab_size, "ninfer-quantize round trip");
}

INSTANTIATE_TEST_SUITE_P(Quantize, QuantizeRoundTrip,
                         testing::Values(RoundTrip{"tiny-qwen3", "compressed-tensors", 4, 32},
                                         RoundTrip{"tiny-qwen3", "gptq", 8, 32},
                                         RoundTrip{"tiny-qwen3_5", "gptq", 4, 32},
                                         RoundTrip{"tiny-qwen3_5-vl-layout", "compressed-tensors", 8, -1},
                                         RoundTrip{"tiny-qwen3", "compressed-tensors", 4, 32, "symmetric: false\n"},
                                         RoundTrip{"tiny-qwen3_5", "gptq", 8, 32, "symmetric: false\n"},
                                         RoundTrip{"tiny-qwen3", "gptq", 4, 32, "method: gptq\n"},
                                         RoundTrip{"tiny-qwen3_5-vl-layout", "gptq", 4, 32, "method: gptq\n"},
                                         RoundTrip{"tiny-qwen3_5", "compressed-tensors", 4, 16,
                                                   "method: gptq\nactorder: true\nsymmetric: false\n"},
                                         RoundTrip{"tiny-qwen3_5", "gptq", 4, 32, "method: gptq\nactorder: true\n"},
                                         RoundTrip{"tiny-qwen3", "gptq", 8, -1,
                                                   "method: gptq\nactorder: true\nsymmetric: false\n"},
                                         RoundTrip{"tiny-qwen3", "compressed-tensors", 4, 32,
                                                   "modules:\n  mlp.down_proj: {bits: 8}\n"},
                                         RoundTrip{"tiny-qwen3_5", "gptq", 4, 32,
                                                   "modules:\n  mlp.down_proj: {bits: 8}\n"},
                                         RoundTrip{"tiny-qwen3", "compressed-tensors", 4, 32,
                                                   "modules:\n  self_attn.o_proj: {symmetric: false, group_size: -1}\n"
                                                   "  lm_head: {bits: 8}\n  mlp.up_proj: {group_size: 16}\n"},
                                         RoundTrip{"tiny-qwen3", "gptq", 4, 32,
                                                   "modules:\n  self_attn.o_proj: {symmetric: false, group_size: -1}\n"
                                                   "  lm_head: {bits: 8}\n  mlp.up_proj: {group_size: 16}\n"},
                                         RoundTrip{"tiny-qwen3_5", "compressed-tensors", 4, 32,
                                                   "method: gptq\nactorder: true\nmodules:\n"
                                                   "  mlp.down_proj: {bits: 8, group_size: 16}\n"}),
                         [](const testing::TestParamInfo<RoundTrip>& p) {
                           std::string n = fmt::format("{}_{}_int{}_g{}", p.param.fixture, p.param.format,
                                                       p.param.bits, p.param.group < 0 ? 0 : p.param.group);
                           if (p.param.recipe) {
                             const std::string r = p.param.recipe;
                             n += r.find("gptq") != std::string::npos ? "_gptq" : "_rtn";
                             n += r.find("actorder") != std::string::npos ? "_actorder" : "";
                             n += r.find("symmetric: false") != std::string::npos ? "_asym" : "";
                             n += r.find("modules:") != std::string::npos ? "_per_role" : "";
                           }
                           for (auto& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The MTP head quantized (recipe `modules: {mtp: {}}`, round to nearest) from the trained demo
// checkpoint, in both layouts: its eight linears (mtp.fc, q|gate, k, v, o, gate, up, down) are
// written packed, and the loaded model's own logits and its head's (the first draft at every
// prompt token) give the float32 twin's top log-probabilities.
TEST(QuantizeMtp, TheHeadsLinearsLoadAsTheOraclesTwin) {
  constexpr int kHeadLinears = 8;
  const fs::path demo = source_dir() / "models" / "qwen3_5-demo";
  auto rng = fresh_rng("QuantizeMtp");
  for (const std::string format : {"compressed-tensors", "gptq"}) {
    TempDir tmp;
    std::ofstream(tmp / "recipe.yaml") << "modules:\n  mtp: {}\n";
    const ProcessOutput r = run_quantize({"--checkpoint", demo.string(), "--out", (tmp / "out").string(), "--format",
                                          format, "--recipe", (tmp / "recipe.yaml").string(), "-q"});
    ASSERT_EQ(r.status, 0) << r.err;
    const RawTensors out = read_output_tensors(tmp / "out");
    int packed_head = 0;
    for (const auto& [name, t] : out)
      packed_head += name.rfind("mtp.", 0) == 0 && (name.ends_with(".weight_packed") || name.ends_with(".qweight"));
    EXPECT_EQ(packed_head, kHeadLinears) << format;
    int replaced = 0;
    const RawTensors twin = dequantized_twin(read_raw_safetensors(demo / "model.safetensors"), out, &replaced);
    fs::create_directories(tmp / "twin");
    write_raw_safetensors(tmp / "twin" / "model.safetensors", twin);
    fs::copy_file(demo / "config.json", tmp / "twin" / "config.json");

    const Checkpoint quantized = Checkpoint::open(tmp / "out"), float_twin = Checkpoint::open(tmp / "twin");
    Backend be = cpu_model_backend();
    ModelOptions o = quant_twin_options();
    o.speculation = {SpecMethod::Mtp, 1};
    auto q_lm = CausalLM::load(quantized, be, o), t_lm = CausalLM::load(float_twin, be, o);
    const int64_t vocab = quantized.config().vocab_size;
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 1);
    std::vector<int32_t> prompt(24);
    for (auto& id : prompt) id = token(rng);
    const auto q_rows = q_lm->prefill(0, prompt, LogitsFor::All), t_rows = t_lm->prefill(0, prompt, LogitsFor::All);
    const int64_t n = static_cast<int64_t>(prompt.size());
    const auto q_head = q_lm->last_step_draft_logits(1, n - 1), t_head = t_lm->last_step_draft_logits(1, n - 1);
    for (int64_t i = 0; i < n; ++i)
      expect_same_top_logprobs(row(q_rows, i, vocab), row(t_rows, i, vocab), fmt::format("{} row {}", format, i));
    for (int64_t i = 0; i + 1 < n; ++i)
      expect_same_top_logprobs(row(q_head, i, vocab), row(t_head, i, vocab), fmt::format("{} head row {}", format, i));
  }
}

} // namespace
