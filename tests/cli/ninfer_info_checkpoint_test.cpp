// ninfer-info --checkpoint DIR on a good folder and on broken copies of it: each problem is
// named, and the exit status says whether the folder is ready to run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "demo_checkpoint.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer::test;
using nlohmann::json;

namespace {

ProcessOutput info_checkpoint(const fs::path& dir, const std::string& extra = "") {
  return run_process(std::string(NINFER_INFO_BIN) + " --checkpoint " + shell_quote(dir.string()) + " " + extra);
}

// A copy of the demo checkpoint that a test may break.
struct Copy {
  fs::path dir;
  explicit Copy(const std::string& name) {
    dir = fs::temp_directory_path() / ("ninfer-info-ck-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::copy(demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN), dir, fs::copy_options::recursive);
  }
  ~Copy() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  json config() const {
    std::ifstream in(dir / "config.json");
    return json::parse(in);
  }
  void write_config(const json& c) const { std::ofstream(dir / "config.json") << c.dump(2); }
};

// The report's unit: GiB with two decimals from 1 GiB, MiB with one below.
std::string size_text(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

} // namespace

TEST(NinferInfoCheckpoint, GoodFolderIsReadyAndItsKvCacheIsEstimated) {
  const Copy ck("good");
  const ProcessOutput r = info_checkpoint(ck.dir, "--max-context 8192");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ready to run"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PROBLEM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer  ok"), std::string::npos) << r.out;
  // KV cache of the full-attention layers, from config.json: K and V, KV heads x head_dim each.
  const json c = ck.config();
  const json& t = c.contains("text_config") ? c["text_config"] : c;
  int64_t attention_layers = 0;
  for (const auto& kind : t["layer_types"]) attention_layers += kind == "full_attention";
  ASSERT_GT(attention_layers, 0);
  const double per_token = 2.0 * attention_layers * t["num_key_value_heads"].get<int64_t>() * t["head_dim"].get<int64_t>();
  EXPECT_NE(r.out.find("of 8192 tokens: " + size_text(per_token * 8192 * 2) + " in float16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(size_text(per_token * 8192 * 4) + " in float32"), std::string::npos) << r.out;
}

TEST(NinferInfoCheckpoint, MissingShardIsNamed) {
  const Copy ck("shard");
  // A sharded layout whose index puts one tensor in a shard that was never downloaded.
  const ProcessOutput names = run_process("python3 -c " +
                                          shell_quote("import json,struct,sys\n"
                                                      "f=open(sys.argv[1],'rb'); n=struct.unpack('<Q',f.read(8))[0]\n"
                                                      "print('\\n'.join(k for k in json.loads(f.read(n)) if k!='__metadata__'))") +
                                          " " + shell_quote((ck.dir / "model.safetensors").string()));
  ASSERT_EQ(names.status, 0) << names.err;
  json map = json::object();
  std::istringstream lines(names.out);
  std::string last;
  for (std::string name; std::getline(lines, name);) {
    map[name] = "model-00001-of-00002.safetensors";
    last = name;
  }
  map[last] = "model-00002-of-00002.safetensors";
  fs::rename(ck.dir / "model.safetensors", ck.dir / "model-00001-of-00002.safetensors");
  std::ofstream(ck.dir / "model.safetensors.index.json") << json{{"weight_map", map}}.dump();
  const ProcessOutput r = info_checkpoint(ck.dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("files      PROBLEM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model-00002-of-00002.safetensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("incomplete"), std::string::npos) << r.out;
}

TEST(NinferInfoCheckpoint, ShapesThatDisagreeWithTheConfigAreListed) {
  const Copy ck("shape");
  json c = ck.config();
  json& t = c.contains("text_config") ? c["text_config"] : c;
  t["intermediate_size"] = t["intermediate_size"].get<int64_t>() * 2;
  ck.write_config(c);
  const ProcessOutput r = info_checkpoint(ck.dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("tensors    PROBLEM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mlp.gate_proj.weight has shape"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("intermediate_size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer  ok"), std::string::npos) << r.out; // the other checks still run
}

TEST(NinferInfoCheckpoint, MissingTokenizerIsAProblem) {
  const Copy ck("tokenizer");
  fs::remove(ck.dir / "tokenizer.json");
  const ProcessOutput r = info_checkpoint(ck.dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer  PROBLEM: no tokenizer.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensors    ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 problem(s)"), std::string::npos) << r.out;
}

TEST(NinferInfoCheckpoint, NotAFolderIsAProblem) {
  const ProcessOutput r = info_checkpoint("/no/such/folder");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("not a folder"), std::string::npos) << r.out;
}
