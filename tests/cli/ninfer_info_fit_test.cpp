// ninfer-info --fit against sizes derived here from the model's shape alone: Qwen3.5-27B on a
// 32 GiB card with bfloat16 and with int4 weights, the context chosen for the room left, and
// the sources it takes (a preset, a checkpoint folder, a manifest).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "demo_checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;
using nlohmann::json;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kContextStep = 256; // an automatic context below the positions is a multiple of it

ProcessOutput info(const std::string& args) { return run_process(std::string(NINFER_INFO_BIN) + " " + args); }

json fit_json(const std::string& args, int want_status) {
  const ProcessOutput r = info("--fit " + args + " --json");
  EXPECT_EQ(r.status, want_status) << args << "\n" << r.err;
  return json::parse(r.out);
}

// The modules ninfer-bench --weights quantizes (the default ninfer-quantize recipe): every
// decoder linear but Gated DeltaNet's in_proj_a / in_proj_b.
bool quantized_module(const ExpectedTensor& t) {
  return t.role == TensorRole::Linear && t.layer >= 0 && !t.name.ends_with("in_proj_a.weight") &&
         !t.name.ends_with("in_proj_b.weight");
}

// Weight bytes of a preset as loaded: bf16 matrices, float32 vectors, GDN in_proj_a / in_proj_b
// once more in float32; with `group` > 0 the quantized modules as int4 codes (two per byte) and
// one bf16 scale per group of each row.
int64_t weight_bytes(const ModelConfig& c, int64_t group) {
  int64_t bytes = 0;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const bool matrix = t.role == TensorRole::Embedding || t.role == TensorRole::Linear;
    if (group > 0 && quantized_module(t))
      bytes += t.shape[0] * ((t.shape[1] + 1) / 2) + t.shape[0] * ((t.shape[1] + group - 1) / group) * 2;
    else
      bytes += n * (matrix ? 2 : 4);
    if (t.name.ends_with("in_proj_a.weight") || t.name.ends_with("in_proj_b.weight")) bytes += n * 4;
  }
  return bytes;
}

int64_t kv_bytes_per_token(const ModelConfig& c, int64_t element) {
  return c.num_layers_of(LayerKind::FullAttention) * 2 * c.num_key_value_heads * c.head_dim * element;
}

// A compact format's bytes per token (kv_append.h): head rows of codes (`code_bits` each) plus
// `scale_bytes` per head row.
int64_t compact_kv_bytes_per_token(const ModelConfig& c, int64_t code_bits, int64_t scale_bytes) {
  return c.num_layers_of(LayerKind::FullAttention) * 2 * c.num_key_value_heads *
         (c.head_dim * code_bits / 8 + scale_bytes);
}

int64_t state_bytes_per_sequence(const ModelConfig& c) {
  const int64_t conv = (2 * c.linear_num_key_heads * c.linear_key_head_dim +
                        c.linear_num_value_heads * c.linear_value_head_dim) *
                       (c.linear_conv_kernel_dim - 1);
  const int64_t recurrent = c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
  return c.num_layers_of(LayerKind::LinearAttention) * (conv + recurrent) * 4;
}

// The longest context for `room` bytes of KV cache at `sequences`: the positions, else a
// multiple of kContextStep.
int64_t longest_context(int64_t room, int64_t per_token, int64_t sequences, int64_t positions) {
  const int64_t per_sequence = room / per_token / sequences;
  return per_sequence >= positions ? positions : per_sequence / kContextStep * kContextStep;
}

const std::string k27bOn32GiB = "--preset qwen3_5-27b --device-model \"RTX 4080 SUPER\" --memory 32 --plugin cpu";

} // namespace

TEST(NinferInfoFit, Qwen35_27bInt4FitsA32GiBCardAndBfloat16DoesNot) {
  const ModelConfig c = shape_preset_config("qwen3_5-27b");
  const json q = fit_json(k27bOn32GiB + " --weights int4-g128", 0);
  ASSERT_TRUE(q["fits"].get<bool>()) << q.dump(2);
  const json& parts = q["parts"];
  EXPECT_EQ(parts["weights"].get<int64_t>(), weight_bytes(c, 128));
  EXPECT_EQ(q["kv_dtype"], "float16") << "a CUDA card's default KV cache";
  EXPECT_EQ(q["kv_bytes_per_token"]["float16"].get<int64_t>(), kv_bytes_per_token(c, 2));
  EXPECT_EQ(q["kv_bytes_per_token"]["float32"].get<int64_t>(), kv_bytes_per_token(c, 4));
  EXPECT_EQ(q["kv_bytes_per_token"]["int8"].get<int64_t>(), compact_kv_bytes_per_token(c, 8, 2 * c.head_dim / 64));
  EXPECT_EQ(q["kv_bytes_per_token"]["fp8"].get<int64_t>(), compact_kv_bytes_per_token(c, 8, 4));
  EXPECT_EQ(q["kv_bytes_per_token"]["int4r"].get<int64_t>(), compact_kv_bytes_per_token(c, 4, 2 * c.head_dim / 64));
  EXPECT_EQ(q["state_bytes_per_sequence"].get<int64_t>(), state_bytes_per_sequence(c));
  EXPECT_EQ(parts["gdn_state"].get<int64_t>(), 4 * state_bytes_per_sequence(c));
  EXPECT_EQ(q["budget"]["limit_bytes"].get<int64_t>(), 32 * kGiB);

  // The context: what the room left after every other part holds at 4 sequences.
  const int64_t per_token = kv_bytes_per_token(c, 2);
  const int64_t others = parts["total"].get<int64_t>() - parts["kv_cache"].get<int64_t>();
  const int64_t ctx = q["max_context"].get<int64_t>();
  EXPECT_EQ(q["concurrency"], 4);
  EXPECT_EQ(ctx, longest_context(32 * kGiB - others, per_token, 4, c.max_position_embeddings));
  EXPECT_EQ(parts["kv_cache"].get<int64_t>(), 4 * ctx * per_token);
  EXPECT_LE(parts["total"].get<int64_t>(), 32 * kGiB);
  EXPECT_EQ(q["kv_tokens_fit"].get<int64_t>(), (32 * kGiB - others) / per_token);
  EXPECT_GT(ctx, 32768) << "int4 weights leave room for long contexts on a 32 GiB card";

  // The table: contexts shrink as concurrency grows, each within the positions and the room.
  int64_t last = c.max_position_embeddings;
  for (const json& row : q["by_concurrency"]) {
    if (!row["fits"].get<bool>()) break;
    const int64_t n = row["concurrency"], rc = row["max_context"];
    EXPECT_LE(rc, last) << row.dump();
    EXPECT_LE(n * rc * per_token, 32 * kGiB - others + kGiB) << row.dump(); // others grow with state per sequence
    last = rc;
  }
  EXPECT_EQ(q["by_concurrency"][0]["concurrency"], 1);

  const json b = fit_json(k27bOn32GiB, 1);
  EXPECT_FALSE(b["fits"].get<bool>());
  EXPECT_EQ(b["parts"]["weights"].get<int64_t>(), weight_bytes(c, 0));
  EXPECT_GT(b["parts"]["weights"].get<int64_t>(), 32 * kGiB);
  EXPECT_NE(b["problem"].get<std::string>().find("does not fit even without its KV cache"), std::string::npos)
      << b["problem"];
}

// --spec mtp plans the preset's one-layer MTP head: its linears in bf16 (with --mtp-weights
// int4-g128: int4 codes and a bf16 scale per group of 128), its norms in float32. Without
// --spec mtp the head is not planned, and --mtp-weights is refused.
TEST(NinferInfoFit, SpecPlansTheMtpHeadInTheWeights) {
  ModelConfig c = shape_preset_config("qwen3_5-27b");
  c.mtp_num_hidden_layers = 1;
  int64_t bf16 = 0, int4 = 0;
  for (const ExpectedTensor& t : mtp_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    if (t.role != TensorRole::Linear) {
      bf16 += 4 * n;
      int4 += 4 * n;
      continue;
    }
    bf16 += 2 * n;
    int4 += t.shape[0] * ((t.shape[1] + 1) / 2) + t.shape[0] * ((t.shape[1] + 127) / 128) * 2;
  }
  const std::string args = k27bOn32GiB + " --weights int4-g128";
  const json plain = fit_json(args, 0), head = fit_json(args + " --spec mtp --draft-tokens 3", 0),
             quantized = fit_json(args + " --spec mtp --draft-tokens 3 --mtp-weights int4-g128", 0);
  const int64_t w = plain["parts"]["weights"].get<int64_t>();
  EXPECT_EQ(head["parts"]["weights"].get<int64_t>() - w, bf16);
  EXPECT_EQ(quantized["parts"]["weights"].get<int64_t>() - w, int4);
  EXPECT_LT(head["max_context"].get<int64_t>(), plain["max_context"].get<int64_t>())
      << "the head and a round's per-position states take room from the KV cache";
  const ProcessOutput r = info("--fit " + args + " --mtp-weights int4-g128");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--mtp-weights quantizes the MTP head, which is planned only with --spec mtp"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(info("--spec mtp").status, 2) << "--spec without --fit";
}

TEST(NinferInfoFit, AGivenContextThatDoesNotFitSaysWhatDoes) {
  const json j = fit_json(k27bOn32GiB + " --weights int4-g128 --max-context 262144 --kv-dtype float32", 1);
  const std::string problem = j["problem"];
  EXPECT_NE(problem.find("max_context 262144 x max_concurrency 4"), std::string::npos) << problem;
  EXPECT_NE(problem.find("the longest context that fits is"), std::string::npos) << problem;
  EXPECT_EQ(j["kv_dtype"], "float32");
}

// The field report's setup: two 262,144-token streams of the 27B with int4 weights on a 32 GiB
// card fit with an int4r cache (17 KiB per token) and not with float16 (64 KiB per token).
TEST(NinferInfoFit, TwoFullContextStreamsOfThe27bFitWithAnInt4rCache) {
  const ModelConfig c = shape_preset_config("qwen3_5-27b");
  const std::string two_full = k27bOn32GiB + " --weights int4-g128 --concurrency 2 --max-context 262144";
  const json r = fit_json(two_full + " --kv-dtype int4r", 0);
  EXPECT_TRUE(r["fits"].get<bool>()) << r.dump(2);
  EXPECT_EQ(r["kv_dtype"], "int4r");
  EXPECT_EQ(r["parts"]["kv_cache"].get<int64_t>(),
            2 * 262144 * compact_kv_bytes_per_token(c, 4, 2 * c.head_dim / 64));
  const json f = fit_json(two_full + " --kv-dtype float16", 1);
  EXPECT_FALSE(f["fits"].get<bool>());
}

TEST(NinferInfoFit, TextNamesThePartsAndTheChoice) {
  const ProcessOutput r = info("--fit " + k27bOn32GiB + " --weights int4-g128 --concurrency 2");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* want : {"weights", "int4 g128", "kv-cache", "gdn-state", "activations", "workspace", "allocator",
                           "cuda graphs", "cuda runtime", "KV per token: 128.0 KiB float32, 64.0 KiB float16",
                           "longest max_context by max_concurrency", "fits: 2 sequences x",
                           "workspace planned by plugin cpu on the host"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

// A checkpoint folder and a manifest of it plan alike, on the host within --memory.
TEST(NinferInfoFit, CheckpointFolderAndManifestOnTheHost) {
  const fs::path ck = demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN);
  const json d = fit_json(shell_quote(ck.string()) + " --device cpu --memory 1 --concurrency 2", 0);
  EXPECT_EQ(d["kv_dtype"], "float32") << "the CPU plugin's KV cache";
  EXPECT_EQ(d["budget"]["limit_bytes"].get<int64_t>(), kGiB);
  EXPECT_EQ(d["concurrency"], 2);
  EXPECT_EQ(d["parts"]["cuda_runtime"], 0);

  const fs::path manifest = fs::temp_directory_path() / ("ninfer-fit-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(manifest) << "checkpoint: " << ck.string() << "\nruntime:\n  max_concurrency: 2\n  memory_limit: 1\n";
  const json m = fit_json(shell_quote(manifest.string()) + " --device cpu", 0);
  fs::remove(manifest);
  EXPECT_EQ(m["parts"], d["parts"]);
  EXPECT_EQ(m["max_context"], d["max_context"]);
}

TEST(NinferInfoFit, CommandLineProblems) {
  EXPECT_EQ(info("--fit").status, 2) << "no source";
  EXPECT_EQ(info("--preset qwen3-8b").status, 2) << "--preset without --fit";
  EXPECT_EQ(info("--fit --preset qwen3-8b --memory 0").status, 2);
  EXPECT_EQ(info("--fit --preset qwen3-8b --weights int5").status, 2);
  // A context below 2 and a draft vocabulary past the model's: named, not planned.
  for (const char* bad : {"--max-context -1", "--max-context 0", "--spec mtp --draft-vocab 999999"}) {
    const auto r = info(std::string("--fit --preset qwen3_5-27b --device-model H200 ") + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("internal"), std::string::npos) << r.err;
  }
}

// A context past the model's positions is refused, naming where it was set: --max-context, or
// the manifest's line.
TEST(NinferInfoFit, AContextPastTheModelsPositionsIsRefused) {
  const fs::path ck = demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN);
  const json cfg = json::parse(std::ifstream(ck / "config.json"));
  const int64_t positions = cfg.contains("text_config") ? cfg["text_config"]["max_position_embeddings"].get<int64_t>()
                                                        : cfg["max_position_embeddings"].get<int64_t>();
  const auto flag = info("--fit " + shell_quote(ck.string()) + " --device cpu --max-context " +
                         std::to_string(positions + 1));
  EXPECT_EQ(flag.status, 1) << flag.err;
  EXPECT_NE(flag.err.find("--max-context: " + std::to_string(positions + 1) + " exceeds the model's " +
                          std::to_string(positions) + " positions"),
            std::string::npos)
      << flag.err;
  const fs::path manifest = fs::temp_directory_path() / ("ninfer-fit-long-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(manifest) << "checkpoint: " << ck.string() << "\nruntime:\n  max_context: " << positions * 2 << "\n";
  const auto line = info("--fit " + shell_quote(manifest.string()) + " --device cpu");
  fs::remove(manifest);
  EXPECT_EQ(line.status, 1) << line.err;
  EXPECT_NE(line.err.find(manifest.string() + ":3: runtime.max_context: " + std::to_string(positions * 2)),
            std::string::npos)
      << line.err;
  EXPECT_EQ(info("--fit " + shell_quote(ck.string()) + " --device cpu --max-context " + std::to_string(positions)).status,
            0);
}
