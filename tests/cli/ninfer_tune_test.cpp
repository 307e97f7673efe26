// ninfer-tune as a user runs it, on the CPU plugin (the machinery is the same on every plugin:
// measure, check against the reference, write a table atomically, the engine picks it up and
// refuses one made elsewhere). Which variant wins on a GPU is the H200 evidence in
// docs/performance.md, not a test.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "demo_checkpoint.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;
using nlohmann::json;

namespace {

struct TuneTest : testing::Test {
  fs::path cache = fs::temp_directory_path() / ("ninfer-tune-test-" + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(cache); }

  ProcessOutput tune(const std::string& args) {
    return run_process("NINFER_CACHE_DIR=" + shell_quote(cache.string()) + " " + NINFER_TUNE_BIN + " " + args);
  }
  ProcessOutput run_model() {
    const fs::path& ck = demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN);
    return run_process("NINFER_CACHE_DIR=" + shell_quote(cache.string()) + " " + NINFER_RUN_BIN + " --checkpoint " +
                       shell_quote(ck.string()) + " --prompt-ids 1,2,3 --max-new 2 --device cpu");
  }
  fs::path only_table() {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(cache / "schedules")) files.push_back(e.path());
    EXPECT_EQ(files.size(), 1u) << "exactly the table, no temporary file left";
    return files.empty() ? fs::path() : files.front();
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

const char* kSmall = "--preset qwen3-cpu-small --device cpu --prefill-chunk 16 --repeats 1";

} // namespace

TEST_F(TuneTest, WritesATableTheEngineUses) {
  const ProcessOutput r = tune(std::string(kSmall) + " --buckets 1,4,16 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  // The default ops: a dense Qwen3 runs linear and norm_linear (no gdn_gating), 3 buckets each.
  ASSERT_EQ(j["buckets"].size(), 6u);
  int per_op[2] = {0, 0};
  for (const json& b : j["buckets"]) {
    ASSERT_TRUE(b["op"] == "linear" || b["op"] == "norm_linear") << b["op"];
    ++per_op[b["op"] == "norm_linear"];
    EXPECT_FALSE(b["default_variant"].get<std::string>().empty());
    EXPECT_GT(b["tuned_us"].get<double>(), 0);
    EXPECT_LE(b["tuned_us"].get<double>(), b["default_us"].get<double>()) << "the tuned choice is the fastest measured";
    EXPECT_NEAR(b["speedup"].get<double>(), b["default_us"].get<double>() / b["tuned_us"].get<double>(), 1e-9);
    // Every variant that ran was checked against the reference; none may be reported wrong here.
    for (const json& x : b["excluded"]) EXPECT_EQ(x.get<std::string>().find("WRONG"), std::string::npos) << x;
    // The CPU plugin's precision emulations are test tools, never candidates (docs/plugins.md).
    if (b["op"] == "linear") ASSERT_TRUE(b["variants_us"].contains("blocked")) << b["variants_us"].dump();
    for (const auto& [name, us] : b["variants_us"].items()) EXPECT_NE(name.rfind("emulate_", 0), 0u) << name;
  }
  EXPECT_EQ(per_op[0], 3);
  EXPECT_EQ(per_op[1], 3);
  const fs::path table = only_table();
  EXPECT_EQ(j["written_to"], table.string());
  // The file is a valid schedule table for this very host and plugin.
  const ScheduleTable t = load_schedule_table(table, data_dir() / "schemas");
  ASSERT_TRUE(t.device.has_value());
  EXPECT_EQ(t.device->name, std::string(host_device().name));
  EXPECT_EQ(t.device->plugin, "cpu");
  EXPECT_EQ(t.arch, "cpu");
  ASSERT_FALSE(t.entries.empty());
  EXPECT_EQ(t.entries.front().op, "linear");
  EXPECT_EQ(t.entries.front().tokens_min, 1);
  const ProcessOutput run = run_model();
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("using the tuned schedule table " + table.string()), std::string::npos) << run.err;
}

TEST_F(TuneTest, TablesFromElsewhereOrWithUnknownEntriesAreRefused) {
  ASSERT_EQ(tune(std::string(kSmall) + " --buckets 1").status, 0);
  const fs::path table = only_table();
  const std::string good = read(table);
  // Another card: the SM count differs.
  std::ofstream(table) << std::regex_replace(good, std::regex("sm_count: [0-9]+"), "sm_count: 999");
  ProcessOutput run = run_model();
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("refused: it was measured on"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("999 SMs"), std::string::npos) << run.err;
  // Another plugin build.
  std::ofstream(table) << std::regex_replace(good, std::regex("plugin_version: [^\\n]+"), "plugin_version: 0.0.0-other");
  run = run_model();
  EXPECT_NE(run.err.find("refused"), std::string::npos) << run.err;
  // An entry for an op or variant that does not exist is an error in the table: the table is
  // refused, naming the entry's line, and the run goes on with the built-in one.
  std::ofstream(table) << good << "  - {op: no_such_op, tokens: [1, 8], variant: fast}\n";
  run = run_model();
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("refused"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(table.string() + ":"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("no_such_op tokens [1, 8] -> fast: unknown op"), std::string::npos) << run.err;
  std::ofstream(table) << good << "  - {op: linear, tokens: [1, 8], variant: no_such_variant}\n";
  run = run_model();
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("refused"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("has no variant 'no_such_variant'"), std::string::npos) << run.err;
  // Not a table at all: refused, the run goes on with the built-in one.
  std::ofstream(table) << "format: [";
  run = run_model();
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("refused"), std::string::npos) << run.err;
}

// --by-matrix on the CPU plugin: its one candidate per op (linear "blocked", norm_linear
// "reference"; the emulations never compete) is every matrix's best, so no matrix may be routed
// apart and no entry may carry dims.
// Which matrices a faster variant takes is tune_table_tests' (TuneMatrixChoice, TuneTable).
TEST_F(TuneTest, ByMatrixRoutesNothingApartWhenOneVariantCompetes) {
  const ProcessOutput r = tune(std::string(kSmall) + " --buckets 1,16 --by-matrix --dry-run --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["buckets"].size(), 4u); // linear and norm_linear at 1 and 16 tokens
  for (const json& b : j["buckets"]) {
    ASSERT_TRUE(b.contains("matrices")) << b.dump();
    EXPECT_TRUE(b["matrices"].empty()) << b.dump();
  }
  for (const json& e : j["entries"]) EXPECT_FALSE(e.contains("dims")) << e.dump();
  EXPECT_EQ(j["written_to"], "");
}

// norm_linear's shapes come from the model's own plans, the gated one (gate|up) kept apart
// from q|k|v: qwen3-cpu-small's q|k|v is 256 -> 4 x 64 + 2 x 2 x 64 = 512, gate|up 256 -> 2 x 768.
// Its widest step is a mixed one: a 16-token chunk (the cost rule's floor, --prefill-chunk 16)
// beside 7 decode rows of the 8 slots the tool loads it with, 23 tokens. Each is checked against
// the CPU reference before it is timed (no WRONG exclusion).
TEST_F(TuneTest, TunesTheModelsNormLinearShapesGatedApart) {
  const ProcessOutput r = tune(std::string(kSmall) + " --buckets 1,4 --ops norm_linear --dry-run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("shape: norm_linear 256x512 up to 23 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("shape: norm_linear 256x1536 (gated) up to 23 tokens"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("shape: linear"), std::string::npos) << "only the asked op: " << r.err;
  EXPECT_EQ(r.out.find("WRONG"), std::string::npos) << r.out;
  const std::regex row(R"(norm_linear\s+bfloat16\s+(1|4)\s+reference\s)");
  int rows = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), row), end; it != end; ++it) ++rows;
  EXPECT_EQ(rows, 2) << r.out;
}

// Quantized linears: --weights int4-g128 quantizes qwen3-cpu-small's decoder linears (q|k|v and
// gate|up are norm_linear calls, o_proj and down_proj linear calls, groups of 128 columns) while
// the LM head stays bf16. Each dtype is tuned apart, every int4 variant is checked against the
// reference before it is timed, and the table's entries name their dtype, so the int4 route
// never takes a bf16 call and the reverse.
TEST_F(TuneTest, TunesQuantizedLinearsUnderTheirOwnDtype) {
  const ProcessOutput r = tune(std::string(kSmall) + " --weights int4-g128 --buckets 1,4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  std::map<std::pair<std::string, std::string>, int> buckets; // (op, dtype) -> buckets
  for (const json& b : j["buckets"]) {
    const std::string op = b["op"], dtype = b["dtype"];
    ++buckets[{op, dtype}];
    for (const json& x : b["excluded"]) EXPECT_EQ(x.get<std::string>().find("WRONG"), std::string::npos) << x;
    const std::string variant = op == "linear" ? "blocked" : "reference"; // the CPU plugin's candidates
    EXPECT_EQ(b["tuned_variant"], variant) << b.dump();
    // Checked against the reference before it was timed: an error within the bound is reported.
    ASSERT_TRUE(b["variants_error"].contains(variant)) << b.dump();
    ASSERT_TRUE(b["variants_error"][variant].is_number()) << b.dump();
    EXPECT_LE(b["variants_error"][variant].get<double>(), 2e-2) << b.dump();
    EXPECT_TRUE(b["variants_us"].contains(variant)) << b.dump();
  }
  const std::map<std::pair<std::string, std::string>, int> want = {
      {{"linear", "int4"}, 2}, {{"norm_linear", "int4"}, 2}, {{"linear", "bfloat16"}, 2}};
  EXPECT_EQ(buckets, want) << j["buckets"].dump();
  // The entries in the JSON and in the file name their dtype.
  int int4_entries = 0;
  for (const json& e : j["entries"])
    if (e.contains("dtypes") && e["dtypes"] == json::array({"int4"})) ++int4_entries;
  // linear and norm_linear, tokens [1, 4] each (one candidate: buckets 1 and 4 merge)
  EXPECT_EQ(int4_entries, 2) << j["entries"].dump();
  const ScheduleTable t = load_schedule_table(only_table(), data_dir() / "schemas");
  auto entry_for = [&](const char* op, int32_t dtype, int64_t tokens, int64_t dims2) {
    ninfer_shape s{};
    s.tokens = tokens;
    s.dims[0] = 256;
    s.dims[1] = 256;
    s.dims[2] = dims2;
    s.dtype = dtype;
    return t.lookup(op, s);
  };
  const ScheduleEntry* q = entry_for("linear", NINFER_DTYPE_INT4, 3, 128);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtypes, std::vector<int32_t>{NINFER_DTYPE_INT4});
  EXPECT_EQ(q->tokens_min, 1);
  EXPECT_EQ(q->tokens_max, 4);
  EXPECT_EQ(q->variant, "blocked");
  const ScheduleEntry* f = entry_for("linear", NINFER_DTYPE_BF16, 3, 0);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->dtypes, std::vector<int32_t>{NINFER_DTYPE_BF16}) << "a bf16 call took another dtype's entry";
  const ScheduleEntry* n = entry_for("norm_linear", NINFER_DTYPE_INT4, 1, 1);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->dtypes, std::vector<int32_t>{NINFER_DTYPE_INT4});
  // An int8 call was not tuned: no tuned entry takes it.
  const ScheduleEntry* other = entry_for("linear", NINFER_DTYPE_INT8, 1, 128);
  EXPECT_TRUE(!other || other->dtypes.empty()) << "a tuned entry took an int8 call";
}

// A quantized checkpoint's own layout reaches the tuned calls: AWQ's zero points and float16
// scales, and GPTQ act order's g_idx (planning group 0), each checked against the reference.
TEST_F(TuneTest, TunesAQuantizedCheckpointWithItsOwnLayout) {
  struct Case {
    const char* fixture;
    const char* shape;
  } cases[] = {{"tiny-qwen3-awq", "int4 (g32, float16 scales, zero points) up to"},
               {"tiny-qwen3_5-gptq4-actorder", "int4 (g32, float16 scales, symmetric, g_idx) up to"}};
  for (const Case& c : cases) {
    const fs::path ck = fixtures_dir() / "quant" / c.fixture / "quantized";
    const ProcessOutput r = tune("--checkpoint " + shell_quote(ck.string()) +
                                 " --device cpu --prefill-chunk 16 --repeats 1 --buckets 1,4 --ops linear --dry-run");
    ASSERT_EQ(r.status, 0) << c.fixture << "\n" << r.err;
    EXPECT_NE(r.err.find(c.shape), std::string::npos) << c.fixture << "\n" << r.err;
    EXPECT_EQ(r.out.find("WRONG"), std::string::npos) << r.out;
    const std::regex row(R"(linear\s+int4\s+(1|4)\s+blocked\s)");
    int rows = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), row), end; it != end; ++it) ++rows;
    EXPECT_EQ(rows, 2) << c.fixture << "\n" << r.out;
  }
}

// SIGINT midway: exit 130, and no table (nor a temporary file) is left behind. 100 repeats keep
// the run far past the 3-s interrupt (at 5 it sometimes finished in 2.2 s and wrote its table).
TEST_F(TuneTest, AnInterruptedRunWritesNothing) {
  const ProcessOutput r = run_process("NINFER_CACHE_DIR=" + shell_quote(cache.string()) +
                                      " timeout --preserve-status -s INT 3 " + NINFER_TUNE_BIN +
                                      " --preset qwen3-cpu-small --device cpu --prefill-chunk 256 --repeats 100");
  EXPECT_EQ(r.status, 130) << r.err;
  EXPECT_NE(r.err.find("interrupted; no table written"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(cache / "schedules") && !fs::is_empty(cache / "schedules"));
}

TEST_F(TuneTest, RefusesBadInputClearly) {
  // Exit 2: the command line (checked before anything loads); 1: the model or the device.
  struct Case {
    std::string args, says;
    int status;
  } cases[] = {
      {"--device cpu", "no model", 2},
      {std::string(kSmall) + " --buckets 0", "--buckets: 0 is outside", 2},
      {std::string(kSmall) + " --buckets 17", "--buckets: 17 is outside", 2},
      {std::string(kSmall) + " --ops attention", "cannot be tuned", 1},
      {std::string(kSmall) + " --ops ''", "--ops needs at least one op", 2},
      {std::string(kSmall) + " --ops linear,nope", "--ops: unknown op 'nope'", 2},
      {"--preset nope --device cpu", "unknown shape preset", 1},
      {"--preset qwen3-cpu-small --device cpu --repeats 0", "--repeats must be >= 1", 2},
      {std::string(kSmall) + " --jit-sweep", "--jit-sweep needs a CUDA device", 1},
      {std::string(kSmall) + " --weights int3-g128", "--weights int3-g128: expected", 2},
      {"--checkpoint /nonexistent --device cpu --weights int4-g128", "excludes", 2},
  };
  for (const Case& c : cases) {
    const ProcessOutput r = tune(c.args);
    EXPECT_EQ(r.status, c.status) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(cache / "schedules"));
}

// --device defaults to auto, as in every tool: the first GPU, else the CPU (this machine's
// plugin, named in the first line).
TEST_F(TuneTest, DeviceDefaultsToAuto) {
  const ProcessOutput r =
      tune("--preset qwen3-cpu-small --prefill-chunk 16 --repeats 1 --buckets 1 --ops linear --dry-run --no-confirm");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.find("on host CPU") != std::string::npos || r.err.find("with plugin cuda") != std::string::npos)
      << r.err;
}
