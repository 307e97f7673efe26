// ninfer-bench as a user runs it, on the CPU plugin with the small shape presets: the JSON
// report's structure, its cost model against numbers derived here from the model shapes, and
// clear errors for bad input. (Speed is never asserted: that is what the tool reports.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "process.hpp"
#include "test_support.hpp"

using namespace ninfer::test;
using nlohmann::json;

namespace {

// `env`: assignments for the command's environment ("NAME=value ..."), or "".
ProcessOutput bench(const std::string& args, const std::string& env = "") {
  return run_process(env + (env.empty() ? "" : " ") + std::string(NINFER_BENCH_BIN) + " " + args);
}

json bench_json(const std::string& args, const std::string& env = "") {
  const ProcessOutput r = bench(args + " --json --device cpu", env);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  return r.status == 0 ? json::parse(r.out) : json::object();
}

constexpr double kExact = 1e-9; // relative: byte counts are integers, rates are ratios of them

} // namespace

// qwen3-cpu-small: 4 dense layers, hidden 256, 4 query / 2 KV heads of 64, MLP 768, vocab
// 151936, tied embeddings. Every point measured, each fraction = tok/s over its roofline.
TEST(NinferBench, ReportsEveryPointAgainstItsRoofline) {
  const json j = bench_json("--preset qwen3-cpu-small --prompt-lengths 16,40 --contexts 0,20,50 --batches 1,3 "
                            "--decode-steps 3 --repeats 2 --warmup 0 --prefill-chunk 32");
  ASSERT_TRUE(j.contains("results"));
  ASSERT_EQ(j["results"].size(), 2u + 3u * 2u);
  for (const json& r : j["results"]) {
    EXPECT_GT(r["tok_s"].get<double>(), 0);
    EXPECT_LE(r["tok_s_min"].get<double>(), r["tok_s"].get<double>());
    EXPECT_GE(r["tok_s_max"].get<double>(), r["tok_s"].get<double>());
    EXPECT_GT(r["roofline_tok_s"].get<double>(), 0);
    EXPECT_NEAR(r["fraction_of_roofline"].get<double>(), r["tok_s"].get<double>() / r["roofline_tok_s"].get<double>(),
                kExact);
  }
  EXPECT_EQ(j["results"][0]["prompt_tokens"], 16);
  EXPECT_EQ(j["results"][3]["context"], 0);
  EXPECT_EQ(j["results"][3]["batch"], 3);
  EXPECT_EQ(j["plugin"], "cpu");
  EXPECT_EQ(j["model"]["random_weights"], true);

  // The cost model, derived independently from the shape.
  const double L = 4, H = 256, I = 768, V = 151936, q = 4 * 64, kv = 2 * 64;
  const double layer_matrices = L * (H * (q + 2 * kv) + q * H + 3 * H * I);
  const double vectors = L * (2 * H + 2 * 64) + H;
  EXPECT_NEAR(j["model"]["parameters"].get<double>(), layer_matrices + V * H + vectors, kExact * 1e8);
  EXPECT_NEAR(j["costs"]["prefill_flop_per_token"].get<double>(), 2 * layer_matrices, kExact * 1e8);
  // float32 KV cache: K and V rows of every layer.
  EXPECT_NEAR(j["costs"]["kv_bytes_per_token"].get<double>(), L * 2 * kv * 4, kExact);
  // bf16 matrices (tied: the LM head reads the whole embedding) + float32 norm vectors.
  EXPECT_NEAR(j["costs"]["weight_bytes_per_step"].get<double>(), 2 * (layer_matrices + V * H) + 4 * vectors, 1.0);
  EXPECT_EQ(j["costs"]["state_bytes_per_sequence"].get<double>(), 0.0);
  // The decode roofline at batch b and context c: b x bandwidth / (weights + b x c x kv bytes).
  const double bw = j["rates"]["bandwidth_bytes_per_s"].get<double>();
  const json& d = j["results"][7]; // context 50, batch 3
  EXPECT_NEAR(d["roofline_tok_s"].get<double>(),
              3 * bw / (j["costs"]["weight_bytes_per_step"].get<double>() + 3 * 50 * L * 2 * kv * 4),
              kExact * d["roofline_tok_s"].get<double>());
  // Depth growth: per batch, each pair of neighbouring depths (0 -> 20, 20 -> 50; the second
  // does not start at 0, so the added cache is the difference of the depths), recomputed here
  // from the points' own rates and the cost model.
  auto point = [&](int context, int batch) -> const json& {
    for (const json& r : j["results"])
      if (r.contains("context") && r["context"] == context && r["batch"] == batch) return r;
    ADD_FAILURE() << "no decode point at context " << context << ", batch " << batch;
    return j["results"][0];
  };
  ASSERT_EQ(j["decode_depth_growth"].size(), 4u);
  const int pairs[4][3] = {{1, 0, 20}, {1, 20, 50}, {3, 0, 20}, {3, 20, 50}}; // batch, from, to
  for (size_t i = 0; i < 4; ++i) {
    const json& g = j["decode_depth_growth"][i];
    const int b = pairs[i][0], c0 = pairs[i][1], c1 = pairs[i][2];
    EXPECT_EQ(g["batch"], b);
    EXPECT_EQ(g["from_context"], c0);
    EXPECT_EQ(g["to_context"], c1);
    const double from_us = 1e6 * b / point(c0, b)["tok_s"].get<double>();
    const double to_us = 1e6 * b / point(c1, b)["tok_s"].get<double>();
    EXPECT_NEAR(g["from_step_us"].get<double>(), from_us, kExact * from_us);
    EXPECT_NEAR(g["to_step_us"].get<double>(), to_us, kExact * to_us);
    const double added = b * (c1 - c0) * L * 2 * kv * 4;
    EXPECT_NEAR(g["added_kv_bytes"].get<double>(), added, kExact * added);
    const double rate = to_us > from_us ? added / ((to_us - from_us) * 1e-6) : 0.0;
    EXPECT_NEAR(g["added_bytes_per_s"].get<double>(), rate, kExact * rate + 1e-9);
  }
  // The variants that ran are listed, with the planner or a schedule entry as their source.
  bool linear = false;
  for (const json& v : j["variants"]) linear |= v["op"] == "linear" && v["shapes"].get<int>() > 0;
  EXPECT_TRUE(linear);
}

// --kv-dtype: the cache's element type is reported, and the cost model follows the allocated
// bytes (2 per element for float16 and bfloat16, 4 for the CPU's default float32, the compact
// formats' codes plus their scales: kv_append.h).
TEST(NinferBench, KvDtypeSetsTheCacheAndItsBytesPerToken) {
  const double L = 4, kv = 2 * 64; // qwen3-cpu-small: 4 layers, 2 KV heads of 64
  for (const auto& [flag, dtype, bytes] : {std::tuple{"", "float32", 4.0}, std::tuple{"--kv-dtype float16", "float16", 2.0},
                                           std::tuple{"--kv-dtype bfloat16", "bfloat16", 2.0},
                                           std::tuple{"--kv-dtype int8", "int8", 1.0 + 2.0 / 64},
                                           std::tuple{"--kv-dtype fp8", "fp8", 1.0 + 4.0 / 64},
                                           std::tuple{"--kv-dtype int4r", "int4r", 0.5 + 2.0 / 64}}) {
    const json j = bench_json(std::string("--preset qwen3-cpu-small --skip-prefill --contexts 8 --batches 1 "
                                          "--decode-steps 2 --repeats 1 --warmup 0 ") + flag);
    ASSERT_TRUE(j.contains("model")) << flag;
    EXPECT_EQ(j["model"]["kv_dtype"], dtype) << flag;
    EXPECT_NEAR(j["costs"]["kv_bytes_per_token"].get<double>(), L * 2 * kv * bytes, kExact) << flag;
  }
  const ProcessOutput r = bench("--preset qwen3-cpu-small --kv-dtype int2 --device cpu");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--kv-dtype int2"), std::string::npos) << r.err;
}

// Qwen3.5 (hybrid): recurrent state is part of a decode step's bytes.
TEST(NinferBench, HybridModelCountsRecurrentState) {
  const json j = bench_json("--preset qwen3_5-cpu-small --skip-prefill --contexts 8 --batches 1 --decode-steps 2 "
                            "--repeats 1 --warmup 0");
  ASSERT_TRUE(j.contains("costs"));
  // 6 Gated DeltaNet layers, 4 value heads of 64x64 float32 state, read and written.
  const double recurrent = 6.0 * 4 * 64 * 64 * 4 * 2;
  EXPECT_GE(j["costs"]["state_bytes_per_sequence"].get<double>(), recurrent);
  EXPECT_LT(j["costs"]["state_bytes_per_sequence"].get<double>(), recurrent * 1.2); // + the small conv state
  EXPECT_EQ(j["results"].size(), 1u);
}

// The ops a run planned onto a plugin variant, and those it ran as their unfused form, from the
// report's "variants".
struct PlannedOps {
  std::set<std::string> variant, unfused;
};
PlannedOps planned_ops(const json& j) {
  PlannedOps ops;
  for (const json& v : j["variants"])
    (v["variant"] == "unfused" ? ops.unfused : ops.variant).insert(v["op"].get<std::string>());
  return ops;
}

// NINFER_UNFUSED_OPS routes fused ops to their unfused forms (docs/architecture.md): the hybrid
// preset's decode plans its fused ops onto the plugin by default, and with the switch runs them
// as the ops they fuse.
TEST(NinferBench, UnfusedOpsSwitchPlansTheFallbackOps) {
  const std::string args = "--preset qwen3_5-cpu-small --skip-prefill --contexts 8 --batches 1 --decode-steps 2 "
                           "--repeats 1 --warmup 0";
  const char* const fused_ops[] = {"norm_linear", "head_norm_rope_append", "conv_l2_norm", "gated_delta_step"};
  const PlannedOps fused = planned_ops(bench_json(args));
  for (const char* op : fused_ops) EXPECT_TRUE(fused.variant.count(op)) << op << " not planned by default";
  EXPECT_FALSE(fused.variant.count("silu_mul")) << "the fused MLP projection needs no silu_mul";
  EXPECT_FALSE(fused.variant.count("head_norm_rope")) << "head_norm_rope_append includes it";
  // head_norm_rope_append's unfused form runs head_norm_rope (itself routed) + kv_append;
  // unfusing both reaches the norm and rope ops themselves.
  const PlannedOps unfused = planned_ops(bench_json(
      args, "NINFER_UNFUSED_OPS=norm_linear,head_norm_rope_append,head_norm_rope,conv_l2_norm,gated_delta_step"));
  for (const char* op : fused_ops) {
    EXPECT_FALSE(unfused.variant.count(op)) << op << " planned onto the plugin although unfused";
    EXPECT_TRUE(unfused.unfused.count(op)) << op << " did not take its unfused form";
  }
  EXPECT_FALSE(unfused.variant.count("head_norm_rope")) << "head_norm_rope planned although unfused";
  for (const char* op :
       {"silu_mul", "rope", "kv_append", "causal_conv1d", "l2_norm", "gated_delta_rule", "gated_rms_norm"})
    EXPECT_TRUE(unfused.variant.count(op)) << op << " (a fallback op) not planned";
}

// --weights on the hybrid preset (qwen3_5-cpu-small: hidden 256, MLP 768, 6 Gated DeltaNet
// layers with q|k 2x64 and v/z 4x64 heads, 2 gated attention layers of 4 query / 2 KV heads of
// 64): the default recipe's modules are quantized (every decoder linear but in_proj_a / in_proj_b;
// the tied LM head stays bfloat16) and a step reads their codes and BF16 group scales instead of
// bfloat16 weights, byte for byte as derived here from the shape; decode runs on them.
TEST(NinferBench, QuantizedWeightsReadTheirCodesAndScales) {
  const double H = 256, I = 768;
  struct Module {
    double rows, cols, count;
  };
  const Module modules[] = {
      {2 * 4 * 64, H, 2}, {2 * 64, H, 2}, {2 * 64, H, 2}, {H, 4 * 64, 2}, // q (with its gate), k, v, o
      {2 * 2 * 64 + 4 * 64, H, 6}, {4 * 64, H, 6}, {H, 4 * 64, 6},        // in_proj_qkv, in_proj_z, out_proj
      {I, H, 8}, {I, H, 8}, {H, I, 8},                                    // gate, up, down
  };
  const std::string args = "--preset qwen3_5-cpu-small --skip-prefill --contexts 8 --batches 1,2 --decode-steps 2 "
                           "--repeats 1 --warmup 0";
  const json bf16 = bench_json(args);
  ASSERT_TRUE(bf16.contains("costs"));
  const double bf16_bytes = bf16["costs"]["weight_bytes_per_step"].get<double>();
  struct Case {
    const char* spec;
    const char* label;
    double code_bytes_per_weight;
    double group;
  } cases[] = {{"int4-g64", "int4 g64", 0.5, 64}, {"int8-g128", "int8 g128", 1, 128}, {"fp8", "fp8 g128", 1, 128},
               {"int4-channel", "int4 channel", 0.5, 0}};
  for (const Case& c : cases) {
    const json q = bench_json(args + " --weights " + c.spec);
    ASSERT_TRUE(q.contains("costs")) << c.spec;
    double saved = 0;
    for (const Module& m : modules) {
      const double groups = c.group > 0 ? std::ceil(m.cols / c.group) : 1;
      saved += m.count * (2 * m.rows * m.cols - c.code_bytes_per_weight * m.rows * m.cols - 2 * m.rows * groups);
    }
    EXPECT_NEAR(q["costs"]["weight_bytes_per_step"].get<double>(), bf16_bytes - saved, 1.0) << c.spec;
    EXPECT_NE(q["model"]["weights_dtype"].get<std::string>().find(c.label), std::string::npos)
        << c.spec << ": " << q["model"]["weights_dtype"];
    ASSERT_EQ(q["results"].size(), 2u) << c.spec;
    for (const json& r : q["results"]) EXPECT_GT(r["tok_s"].get<double>(), 0) << c.spec;
  }
  for (const auto& [flag, says] :
       {std::pair{"--weights int3-g128", "--weights int3-g128: expected int4-gN"},
        std::pair{"--weights int4-g0", "--weights int4-g0"},
        std::pair{"--weights int4-g100", "group"}}) {
    const ProcessOutput r = bench(std::string("--preset qwen3_5-cpu-small --device cpu ") + flag);
    EXPECT_NE(r.status, 0) << flag;
    EXPECT_NE(r.err.find(says), std::string::npos) << flag << "\n" << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << flag << "\n" << r.err;
  }
  const ProcessOutput r = bench("--checkpoint /nonexistent --weights int4-g128 --device cpu");
  EXPECT_EQ(r.status, 2) << r.err;
}

TEST(NinferBench, RefusesBadInputClearly) {
  // Exit 2: the command line (checked before anything loads); 1: the model or the device.
  struct Case {
    const char* args;
    const char* says;
    int status;
  } cases[] = {
      {"--preset nope --device cpu", "presets: qwen3-0.6b", 1},
      {"--device cpu", "give --preset NAME", 2},
      {"--preset qwen3-cpu-small --prompt-lengths 0 --device cpu", "--prompt-lengths: 0", 2},
      {"--preset qwen3-cpu-small --batches 2,-1 --device cpu", "--batches: -1", 2},
      {"--preset qwen3-cpu-small --skip-prefill --skip-decode --device cpu", "leave nothing", 2},
      {"--preset qwen3-cpu-small --dtype fp8 --device cpu", "--dtype fp8", 2},
      {"--preset qwen3-cpu-small --device cuda:7", "cuda", 1},
      {"--preset qwen3-cpu-small --prompt-lengths 40000 --device cpu --skip-decode", "max_position_embeddings = 32768", 1},
      {"--preset qwen3_5-cpu-small --spec-acceptance 0.5 --device cpu", "add --spec mtp", 2},
      {"--preset qwen3_5-cpu-small --spec mtp --spec-acceptance 2 --device cpu", "--spec-acceptance 2", 2},
      // Speculation settings without a method (the preset's manifest has none): refused at setup.
      {"--preset qwen3_5-cpu-small --draft-tokens 2 --device cpu", "--draft-tokens sets speculative decoding up", 1},
      {"--preset qwen3_5-cpu-small --draft-vocab 100 --device cpu", "add --spec mtp", 1},
      // The sampling settings' ranges are the requests' own (SamplingParams::validate).
      {"--preset qwen3-cpu-small --temperature -1 --device cpu",
       "temperature must be >= 0 (0, or below 1e-5, means greedy), got -1", 2},
      {"--preset qwen3-cpu-small --temperature 0.7 --top-p 1.5 --device cpu",
       "top_p must be in (0, 1] (1 turns it off), got 1.5", 2},
      {"--preset qwen3-cpu-small --temperature 0.7 --top-k -3 --device cpu",
       "top_k must be >= 0 (0 turns it off), got -3", 2},
      {"--preset qwen3-cpu-small --top-k 20 --device cpu", "give --temperature above 0", 2},
  };
  for (const Case& c : cases) {
    const ProcessOutput r = bench(c.args);
    EXPECT_EQ(r.status, c.status) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << c.args << "\n" << r.err;
  }
  const ProcessOutput list = bench("--list-presets");
  EXPECT_EQ(list.status, 0);
  for (const char* p : {"qwen3-0.6b", "qwen3-8b", "qwen3-32b", "qwen3_5-27b"})
    EXPECT_NE(list.out.find(p), std::string::npos) << p;
}

// --temperature and its filters reach the report (the table's note, the JSON's "sampling");
// without them the points are greedy and say nothing of sampling.
TEST(NinferBench, SamplingSettingsAreReported) {
  const std::string args = "--preset qwen3-cpu-small --skip-prefill --contexts 4 --batches 2 --decode-steps 4 "
                           "--repeats 1 --warmup 0";
  const std::string settings = " --temperature 0.7 --top-k 20 --top-p 0.95 --min-p 0.01";
  const json sampled = bench_json(args + settings);
  EXPECT_EQ(sampled["sampling"]["temperature"].get<double>(), 0.7);
  EXPECT_EQ(sampled["sampling"]["top_k"].get<int>(), 20);
  EXPECT_EQ(sampled["sampling"]["top_p"].get<double>(), 0.95);
  EXPECT_EQ(sampled["sampling"]["min_p"].get<double>(), 0.01);
  ASSERT_EQ(sampled["results"].size(), 1u);
  EXPECT_GT(sampled["results"][0]["tok_s"].get<double>(), 0.0);
  const ProcessOutput table = bench(args + settings + " --device cpu");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("sampled their tokens on the device: temperature 0.7, top-k 20, top-p 0.95, min-p 0.01"),
            std::string::npos)
      << table.out;
  EXPECT_EQ(bench_json(args)["sampling"]["temperature"].get<double>(), 0.0);
  const ProcessOutput greedy = bench(args + " --device cpu");
  ASSERT_EQ(greedy.status, 0) << greedy.err;
  EXPECT_EQ(greedy.out.find("sampled their tokens"), std::string::npos);
}

// --spec-acceptance P: every round keeps its drafts one by one with probability P. At 0 and 1
// the acceptance is exact (no draft, every draft); at 0.5 the mean accepted length over 256 rows
// is 1 + 0.5 + 0.25 + 0.125 = 1.875 within 0.3 (its standard error is about 0.06).
TEST(NinferBench, SpecAcceptanceSetsTheRoundsAcceptance) {
  const std::string args = "--preset qwen3_5-cpu-small --skip-prefill --contexts 4 --batches 2 --warmup 0 --spec mtp "
                           "--draft-tokens 3 --spec-acceptance ";
  constexpr double kMeanLengthTolerance = 0.3;
  for (const auto& [p, by_position, mean] : {std::tuple{"0", 0.0, 1.0}, std::tuple{"1", 1.0, 4.0}}) {
    const json j = bench_json(args + p + " --decode-steps 4 --repeats 1");
    ASSERT_EQ(j["results"].size(), 1u) << p;
    const json& s = j["results"][0]["speculation"];
    EXPECT_EQ(s["forced_acceptance"].get<double>(), std::stod(p));
    for (const json& a : s["acceptance_by_position"]) EXPECT_EQ(a.get<double>(), by_position) << p;
    EXPECT_EQ(s["mean_accepted_length"].get<double>(), mean) << p;
  }
  const json half = bench_json(args + "0.5 --decode-steps 64 --repeats 2");
  ASSERT_EQ(half["results"].size(), 1u);
  EXPECT_NEAR(half["results"][0]["speculation"]["mean_accepted_length"].get<double>(), 1.875, kMeanLengthTolerance);
}

// --spec-verify-only: the rounds' report says they verified only (with --spec-acceptance 0 each
// gains one token per sequence), and without --spec mtp the flag is refused naming it.
TEST(NinferBench, SpecVerifyOnlyRoundsAreReportedAndNeedSpeculation) {
  const json j = bench_json("--preset qwen3_5-cpu-small --skip-prefill --contexts 4 --batches 2 --warmup 0 --spec mtp "
                            "--draft-tokens 3 --spec-acceptance 0 --spec-verify-only --decode-steps 4 --repeats 1");
  ASSERT_EQ(j["results"].size(), 1u);
  const json& s = j["results"][0]["speculation"];
  EXPECT_TRUE(s.value("verify_only", false)) << s;
  EXPECT_EQ(s["mean_accepted_length"].get<double>(), 1.0);
  EXPECT_GT(j["results"][0]["tok_s"].get<double>(), 0);
  const ProcessOutput r = bench("--preset qwen3_5-cpu-small --device cpu --spec-verify-only");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--spec-verify-only times the verification pass"), std::string::npos) << r.err;
}

// --mtp-weights quantizes the MTP head's linears alone (mtp.fc [H, 2H] and its layer's q (with
// its gate), k, v, o, gate, up, down on qwen3_5-cpu-small): the weights shrink by exactly their
// bf16 bytes less their int4 codes and bf16 scales, the report names the head's format, and
// without --spec mtp the flag is refused.
TEST(NinferBench, MtpWeightsQuantizeTheHeadAlone) {
  const double H = 256, I = 768, group = 64;
  const double head[][2] = {{H, 2 * H}, {2 * 4 * 64, H}, {2 * 64, H}, {2 * 64, H}, {H, 4 * 64}, {I, H}, {I, H}, {H, I}};
  double saved = 0;
  for (const auto& [rows, cols] : head) saved += 2 * rows * cols - 0.5 * rows * cols - 2 * rows * std::ceil(cols / group);
  const std::string args = "--preset qwen3_5-cpu-small --skip-prefill --contexts 4 --batches 1 --decode-steps 2 "
                           "--repeats 1 --warmup 0 --spec mtp --draft-tokens 2";
  const json bf16 = bench_json(args), q = bench_json(args + " --mtp-weights int4-g64");
  ASSERT_TRUE(bf16.contains("memory_bytes") && q.contains("memory_bytes"));
  EXPECT_EQ(bf16["memory_bytes"]["weights"].get<double>() - q["memory_bytes"]["weights"].get<double>(), saved);
  EXPECT_NE(q["model"]["weights_dtype"].get<std::string>().find("MTP head int4 g64"), std::string::npos)
      << q["model"]["weights_dtype"];
  ASSERT_EQ(q["results"].size(), 1u);
  EXPECT_GT(q["results"][0]["tok_s"].get<double>(), 0);
  const ProcessOutput r = bench("--preset qwen3_5-cpu-small --device cpu --mtp-weights int4-g128");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--mtp-weights quantizes the MTP head, which runs only with --spec mtp"), std::string::npos)
      << r.err;
  const ProcessOutput bad = bench("--preset qwen3_5-cpu-small --device cpu --spec mtp --mtp-weights int3");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("--mtp-weights int3: expected int4-gN"), std::string::npos) << bad.err;
}

// On the CPU, a run that names no points measures CPU-sized ones (a GPU's 32,768-token
// prefill would take hours there), says so, and says what it is measuring as it goes.
TEST(NinferBench, CpuRunWithoutPointsMeasuresCpuSizedPoints) {
  const json j = bench_json("--preset qwen3-cpu-small --repeats 1 --warmup 0");
  ASSERT_TRUE(j.contains("results"));
  std::set<int64_t> prompts, contexts, batches;
  for (const json& r : j["results"]) {
    if (r["phase"] == "prefill") prompts.insert(r["prompt_tokens"].get<int64_t>());
    else {
      contexts.insert(r["context"].get<int64_t>());
      batches.insert(r["batch"].get<int64_t>());
    }
  }
  EXPECT_EQ(prompts, (std::set<int64_t>{64, 256}));
  EXPECT_EQ(contexts, (std::set<int64_t>{0, 256}));
  EXPECT_EQ(batches, (std::set<int64_t>{1, 2}));
  EXPECT_LT(j["max_context"].get<int64_t>(), 1024);

  const ProcessOutput text = bench("--preset qwen3-cpu-small --device cpu --repeats 1 --warmup 0 --skip-decode");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.err.find("CPU-sized points"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("measuring prefill of 256 tokens"), std::string::npos) << text.err;
  // Points given on the command line are measured as given.
  const json given = bench_json("--preset qwen3-cpu-small --prompt-lengths 20 --skip-decode --repeats 1 --warmup 0");
  ASSERT_EQ(given["results"].size(), 1u);
  EXPECT_EQ(given["results"][0]["prompt_tokens"], 20);
}
