// ninfer-quantize when things go wrong: (e) a run killed mid-write or stopped by an error
// leaves no checkpoint at --out (and an error leaves no staging folder either; --force keeps
// the old checkpoint); (f) every bad input is refused with exit status 1 (2 for the command
// line) and one line that names the problem, before anything is written: GPTQ's calibration problems (no text, text
// too short, no tokenizer, a model that cannot be loaded) among them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "quant_oracle.hpp"
#include "random_source.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(NinferQuantizeFailure, KilledRunLeavesNoCheckpointAtOut) {
  auto rng = test::fresh_rng("NinferQuantizeFailure.KilledRunLeavesNoCheckpointAtOut");
  test::TempDir tmp;
  const auto src = test::make_source_checkpoint("tiny-qwen3_5", "BF16", rng, tmp / "in");
  const fs::path out = tmp / "out";
  const auto r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", out.string(), "--group-size", "32",
                                     "--max-shard-size", "20KB", "--quiet"},
                                    "NINFER_QUANTIZE_TEST_KILL_AFTER=20");
  EXPECT_NE(r.status, 0) << "the run was not killed: " << r.out;
  EXPECT_FALSE(fs::exists(out)) << "a killed run left " << out;
  // What it leaves is a hidden staging sibling with part of the data, never at --out.
  size_t partial = 0;
  for (const auto& name : entries(tmp.path())) partial += name.rfind(".out.partial-", 0) == 0;
  EXPECT_EQ(partial, 1u);
}

// A NaN in the last layer's weights stops the run after earlier tensors were written.
TEST(NinferQuantizeFailure, ErrorMidwayLeavesNothingAndForceKeepsTheOldCheckpoint) {
  auto rng = test::fresh_rng("NinferQuantizeFailure.ErrorMidwayLeavesNothingAndForceKeepsTheOldCheckpoint");
  test::TempDir tmp;
  auto src = test::make_source_checkpoint("tiny-qwen3", "F32", rng, tmp / "in");
  const std::string bad = "model.layers.2.mlp.up_proj.weight";
  auto& t = src.tensors.at(bad);
  t.bytes.replace(4 * 77, 4, test::encode_value(std::nan(""), "F32"));
  test::write_raw_safetensors(src.dir / "model.safetensors", src.tensors);

  const fs::path out = tmp / "out";
  auto r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", out.string(), "--group-size", "32"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nan"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"in"})) << "a staging folder was left behind";

  fs::create_directory(out);
  test::write_json(out / "config.json", {{"old", true}});
  r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", out.string(), "--group-size", "32", "--force"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(test::read_json(out / "config.json"), json({{"old", true}})) << "the old checkpoint was touched";
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"in", "out"}));
}

TEST(NinferQuantizeFailure, ForceReplacesAnEarlierCheckpoint) {
  auto rng = test::fresh_rng("NinferQuantizeFailure.ForceReplacesAnEarlierCheckpoint");
  test::TempDir tmp;
  const auto src = test::make_source_checkpoint("tiny-qwen3", "BF16", rng, tmp / "in");
  const fs::path out = tmp / "out";
  fs::create_directory(out);
  test::write_json(out / "config.json", {{"old", true}});
  test::write_file_bytes(out / "stale.safetensors", "x");
  const auto r = test::run_quantize({"--checkpoint", src.dir.string(), "--out", out.string(), "--group-size", "32",
                                     "--force"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(test::read_json(out / "config.json").contains("quantization_config"));
  EXPECT_FALSE(fs::exists(out / "stale.safetensors"));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"in", "out"}));
}

struct BadInput {
  const char* what;
  std::function<std::vector<std::string>(const fs::path& tmp, const fs::path& in)> args; // may edit the input
  std::vector<std::string> message;                                                      // each must appear
  int status = 1;
  const char* fixture = "tiny-qwen3";
};

TEST(NinferQuantizeFailure, EveryBadInputNamesTheProblem) {
  auto rng = test::fresh_rng("NinferQuantizeFailure.EveryBadInputNamesTheProblem");
  auto base = [](const fs::path& tmp, const fs::path& in) {
    return std::vector<std::string>{"--checkpoint", in.string(), "--out", (tmp / "out").string(), "--group-size", "32"};
  };
  auto with = [&](std::vector<std::string> extra) {
    return [=](const fs::path& tmp, const fs::path& in) {
      auto a = base(tmp, in);
      a.insert(a.end(), extra.begin(), extra.end());
      return a;
    };
  };
  auto recipe = [&](std::string yaml) {
    return [=](const fs::path& tmp, const fs::path& in) {
      test::write_file_bytes(tmp / "recipe.yaml", yaml);
      auto a = base(tmp, in);
      a.push_back("--recipe");
      a.push_back((tmp / "recipe.yaml").string());
      return a;
    };
  };
  const std::vector<BadInput> cases = {
      {"no such input", [](const fs::path& tmp, const fs::path&) {
         return std::vector<std::string>{"--checkpoint", (tmp / "nowhere").string(), "--out", (tmp / "out").string()};
       }, {"nowhere", "not a folder"}},
      {"output exists", [&](const fs::path& tmp, const fs::path& in) {
         fs::create_directory(tmp / "out");
         return base(tmp, in);
       }, {"already exists", "--force"}},
      {"--force on a folder that is no checkpoint", [&](const fs::path& tmp, const fs::path& in) {
         fs::create_directory(tmp / "out");
         test::write_file_bytes(tmp / "out" / "notes.txt", "mine");
         auto a = base(tmp, in);
         a.push_back("--force");
         return a;
       }, {"no config.json", "--force"}},
      {"output is the input", [](const fs::path&, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", in.string(), "--force"};
       }, {"input checkpoint itself"}},
      {"--out holds the input (--force would delete it)", [](const fs::path& tmp, const fs::path& in) {
         test::write_file_bytes(tmp / "config.json", "{}"); // a checkpoint-looking folder --force would replace
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", tmp.string(), "--force"};
       }, {"holds the input checkpoint"}},
      {"--out inside the input", [](const fs::path&, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", (in / "int4").string()};
       }, {"inside the input checkpoint"}},
      {"--out empty", [](const fs::path&, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", ""};
       }, {"--out is empty"}},
      {"parent of --out missing", [](const fs::path& tmp, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", (tmp / "a" / "b").string(),
                                         "--group-size", "32"};
       }, {"parent folder", "does not exist"}},
      {"group size does not divide K", [](const fs::path& tmp, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", (tmp / "out").string(),
                                         "--group-size", "48"};
       }, {"--group-size 48", "group_size 48", "does not divide the 160 input channels",
           "model.layers.0.mlp.down_proj.weight [64, 160]"}},
      {"default group size on a tiny model", [](const fs::path& tmp, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string(), "--out", (tmp / "out").string()};
       }, {"group_size 128", "does not divide", "--group-size"}},
      {"3 bits", with({"--bits", "3"}), {"bits 3"}},
      {"unknown format", with({"--format", "awq"}), {"format 'awq'", "compressed-tensors", "gptq"}},
      {"recipe: unknown role", recipe("modules:\n  mlp.gate: {bits: 8}\n"), {"recipe.yaml:2", "mlp.gate"}},
      {"recipe: role the model lacks", recipe("modules:\n  linear_attn.in_proj_qkv: {bits: 8}\n"),
       {"recipe.yaml:2", "linear_attn.in_proj_qkv", "does not have"}},
      {"recipe: an MTP head the model lacks", recipe("modules:\n  mtp: {}\n"),
       {"recipe.yaml:2", "mtp", "does not have"}},
      {"recipe: gptq for the MTP head", recipe("method: gptq\nmodules:\n  mtp: {}\n"),
       {"recipe.yaml:3", "modules: mtp", "does not run the MTP head", "method rtn"}},
      {"recipe: method gptq without calibration", recipe("method: gptq\n"),
       {"method gptq needs --calibration FILE", "--method rtn"}},
      {"--calibration under method rtn", [&](const fs::path& tmp, const fs::path& in) {
         test::write_file_bytes(tmp / "calib.txt", "text");
         return with({"--calibration", (tmp / "calib.txt").string()})(tmp, in);
       }, {"--calibration", "method rtn", "reads no activations"}},
      {"calibration file missing", with({"--method", "gptq", "--calibration", "/nonexistent/calib.txt"}),
       {"--calibration /nonexistent/calib.txt", "no such file"}},
      {"calibration file a folder", [&](const fs::path& tmp, const fs::path& in) {
         return with({"--method", "gptq", "--calibration", tmp.string()})(tmp, in);
       }, {"--calibration", "not a regular file (a folder)"}},
      {"calibration text shorter than one sample", [&](const fs::path& tmp, const fs::path& in) {
         test::write_byte_level_tokenizer(in);
         test::write_file_bytes(tmp / "calib.txt", "a short text");
         return with({"--method", "gptq", "--calibration", (tmp / "calib.txt").string(), "--calibration-tokens",
                      "64"})(tmp, in);
       }, {"calib.txt", "12 tokens", "fewer than one sample of --calibration-tokens 64"}},
      {"calibration without a tokenizer", [&](const fs::path& tmp, const fs::path& in) {
         fs::remove(in / "tokenizer.json");
         test::write_file_bytes(tmp / "calib.txt", "text");
         return with({"--method", "gptq", "--calibration", (tmp / "calib.txt").string()})(tmp, in);
       }, {"no tokenizer.json", "calibration"}},
      {"calibration model not loadable", [&](const fs::path& tmp, const fs::path& in) {
         test::write_byte_level_tokenizer(in);
         test::write_file_bytes(tmp / "calib.txt", std::string(400, 'x'));
         fs::create_directory(tmp / "no-plugins");
         return with({"--method", "gptq", "--calibration", (tmp / "calib.txt").string(), "--calibration-tokens", "8",
                      "--plugin-dir", (tmp / "no-plugins").string()})(tmp, in);
       }, {"the float model cannot be loaded on --device cpu"}},
      {"calibration samples of one token", [&](const fs::path& tmp, const fs::path& in) {
         test::write_file_bytes(tmp / "calib.txt", "text");
         return with({"--method", "gptq", "--calibration", (tmp / "calib.txt").string(), "--calibration-tokens",
                      "1"})(tmp, in);
       },
       {"--calibration-tokens 1", "at least 2 tokens"}},
      {"recipe: actorder under rtn", recipe("actorder: true\n"), {"recipe.yaml:1", "actorder applies to method gptq"}},
      {"recipe: group size on one role", recipe("group_size: 32\nmodules:\n  mlp.down_proj: {group_size: 48}\n"),
       {"recipe.yaml:3", "group_size 48", "mlp.down_proj", "160 input channels"}},
      {"recipe: missing file", [&](const fs::path& tmp, const fs::path& in) {
         auto a = base(tmp, in);
         a.push_back("--recipe");
         a.push_back((tmp / "none.yaml").string());
         return a;
       }, {"none.yaml"}},
      {"GPTQ cannot pack 4 output channels",
       recipe("format: gptq\ngroup_size: 32\nmodules:\n  linear_attn.in_proj_a: {}\n"),
       {"recipe.yaml:4", "in_proj_a.weight [4, 64]", "output channels", "qzeros"}, 1, "tiny-qwen3_5"},
      {"already quantized", [&](const fs::path& tmp, const fs::path& in) {
         json c = test::read_json(in / "config.json");
         c["quantization_config"] = {{"quant_method", "gptq"}};
         test::write_json(in / "config.json", c);
         return base(tmp, in);
       }, {"config.json", "already quantized", "quantization_config"}},
      {"truncated input tensor", [&](const fs::path& tmp, const fs::path& in) {
         const std::string all = test::read_file_bytes(in / "model.safetensors");
         test::write_file_bytes(in / "model.safetensors", all.substr(0, all.size() - 100));
         return base(tmp, in);
       }, {"model.safetensors", "truncated or corrupt"}},
      {"missing tensor", [&](const fs::path& tmp, const fs::path& in) {
         auto t = test::read_raw_safetensors(in / "model.safetensors");
         t.erase("model.layers.1.self_attn.k_proj.weight");
         test::write_raw_safetensors(in / "model.safetensors", t);
         return base(tmp, in);
       }, {"model.layers.1.self_attn.k_proj.weight", "missing"}},
      {"unknown flag", with({"--calibrate", "x.txt"}), {"--calibrate"}, 2},
      {"no --out", [](const fs::path&, const fs::path& in) {
         return std::vector<std::string>{"--checkpoint", in.string()};
       }, {"--out is required"}, 2},
      {"bad shard size", with({"--max-shard-size", "lots"}), {"--max-shard-size", "lots"}, 2},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    test::TempDir tmp;
    const auto src = test::make_source_checkpoint(c.fixture, "BF16", rng, tmp / "in");
    const auto r = test::run_quantize(c.args(tmp.path(), src.dir));
    EXPECT_EQ(r.status, c.status) << r.err;
    for (const auto& m : c.message) EXPECT_NE(r.err.find(m), std::string::npos) << "'" << m << "' not in: " << r.err;
    if (c.status == 1) EXPECT_EQ(r.err.rfind("ninfer-quantize: error: ", 0), 0u) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "out" / "model.safetensors")) << "something was written";
    EXPECT_TRUE(fs::exists(src.dir / "model.safetensors")) << "the input is gone";
    for (const auto& e : fs::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
  }
}

TEST(NinferQuantizeFailure, HelpDescribesTheFlags) {
  const auto r = test::run_quantize({"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--checkpoint", "--out", "--recipe", "--format", "--bits", "--group-size", "--force",
                           "--max-shard-size", "--method", "--calibration", "--calibration-tokens",
                           "--calibration-samples", "--device", "--plugin-dir", "--hessian-memory",
                           "--calibration-layers-per-pass", "Exit status"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

} // namespace
} // namespace ninfer
