#include "tune_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <utility>

namespace ninfer::tools {

namespace {

// Adds `e` to `list`, or widens an entry of the same op, dtypes, variant and dims whose tokens
// end just below e's (neighbouring buckets with the same choice become one entry).
void add_merged(std::vector<ScheduleEntry>& list, ScheduleEntry e) {
  for (ScheduleEntry& x : list)
    if (x.op == e.op && x.dtypes == e.dtypes && x.variant == e.variant && x.dims == e.dims &&
        x.tokens_max + 1 == e.tokens_min) {
      x.tokens_max = e.tokens_max;
      return;
    }
  list.push_back(std::move(e));
}

} // namespace

ScheduleTable tuned_table(const TuneRun& run, const ScheduleTable& builtin, const ScheduleDevice& device) {
  ScheduleTable t;
  t.arch = builtin.arch;
  t.device = device;
  // The first entry that covers a call wins, so the matrices' own entries (dims ranges) go
  // ahead of every bucket entry, and the built-in entries last. Every tuned entry names the
  // weight dtype it was measured on: a choice for int4 weights says nothing of bf16 ones, and on
  // a plugin whose variant takes both (the CPU's) it would otherwise route them too.
  std::vector<ScheduleEntry> matrices, buckets;
  std::pair<std::string, int32_t> group; // (op, dtype): buckets are consecutive per group
  int64_t prev = 0;
  for (const BucketResult& b : run.buckets) {
    if (group != std::pair(b.op, b.dtype)) {
      group = {b.op, b.dtype};
      prev = 0;
    }
    const int64_t lo = prev + 1;
    prev = b.tokens;
    if (b.tuned_variant.empty()) continue;
    for (const MatrixChoice& m : b.matrices)
      add_merged(matrices, {b.op, lo, b.tokens, m.variant, std::nullopt, "",
                            {{m.dims[0], m.dims[0]}, {m.dims[1], m.dims[1]}, {m.dims[2], m.dims[2]}}, {b.dtype}});
    add_merged(buckets, {b.op, lo, b.tokens, b.tuned_variant, std::nullopt, "", {}, {b.dtype}});
  }
  t.entries = std::move(matrices);
  t.entries.insert(t.entries.end(), buckets.begin(), buckets.end());
  t.entries.insert(t.entries.end(), builtin.entries.begin(), builtin.entries.end());
  return t;
}

void print_summary(const TuneRun& run) {
  fmt::print("{:<12} {:<9} {:>7} {:>22} {:>10} {:>22} {:>10} {:>8} {:>22}\n", "op", "dtype", "tokens",
             "built-in choice", "us", "tuned choice", "us", "speed-up", "pass us built-in/tuned");
  for (const BucketResult& b : run.buckets) {
    const std::string pass = b.builtin_pass_us > 0 ? fmt::format("{:.0f}/{:.0f}", b.builtin_pass_us, b.tuned_pass_us) : "-";
    const std::string tuned = b.reverted ? "(built-in kept)" : b.tuned_variant.empty() ? "-" : b.tuned_variant;
    fmt::print("{:<12} {:<9} {:>7} {:>22} {:>10.1f} {:>22} {:>10.1f} {:>7.2f}x {:>22}\n", b.op,
               ninfer_dtype_name(b.dtype), b.tokens, b.default_variant, b.default_us, tuned, b.tuned_us,
               b.tuned_us > 0 ? b.default_us / b.tuned_us : 0.0, pass);
    for (const MatrixChoice& m : b.matrices)
      fmt::print("{:<12} {:<9} {:>7}   {:>20} {:>10.1f} {:>22} {:>10.1f} {:>7.2f}x\n", "", "", "",
                 fmt::format("{}: {}", matrix_name(m.dims), b.tuned_variant), m.bucket_us, m.variant, m.us,
                 m.bucket_us / m.us);
  }
  bool any = false;
  for (const BucketResult& b : run.buckets)
    for (const std::string& x : b.excluded) {
      if (!any) fmt::print("\nexcluded:\n");
      any = true;
      fmt::print("  {} {} tokens {}: {}\n", b.op, ninfer_dtype_name(b.dtype), b.tokens, x);
    }
  fmt::print("\n{:.1f} s of measurements{}\n", run.seconds,
             run.budget_exhausted ? "; --budget-seconds ran out: the remaining buckets keep the built-in choice" : "");
  std::fflush(stdout);
}

void print_summary_json(const TuneRun& run, const ScheduleTable& table, const std::string& written_to) {
  using nlohmann::json;
  json rows = json::array();
  for (const BucketResult& b : run.buckets) {
    json all = json::object(), error = json::object();
    for (const auto& [v, us] : b.all_us) all[v] = us;
    for (const auto& [v, e] : b.error) error[v] = e;
    json matrices = json::array();
    for (const MatrixChoice& m : b.matrices)
      matrices.push_back({{"dims", m.dims}, {"variant", m.variant}, {"us", m.us}, {"bucket_us", m.bucket_us}});
    rows.push_back({{"op", b.op},
                    {"dtype", ninfer_dtype_name(b.dtype)},
                    {"tokens", b.tokens},
                    {"default_variant", b.default_variant},
                    {"default_us", b.default_us},
                    {"tuned_variant", b.tuned_variant},
                    {"tuned_us", b.tuned_us},
                    {"speedup", b.tuned_us > 0 ? b.default_us / b.tuned_us : 0.0},
                    {"variants_us", all},
                    {"variants_error", error},
                    {"matrices", matrices},
                    {"builtin_pass_us", b.builtin_pass_us},
                    {"tuned_pass_us", b.tuned_pass_us},
                    {"reverted", b.reverted},
                    {"excluded", b.excluded}});
  }
  json entries = json::array();
  for (const ScheduleEntry& e : table.entries) {
    json entry = {{"op", e.op}, {"tokens", {e.tokens_min, e.tokens_max}}, {"variant", e.variant}};
    if (!e.dims.empty()) entry["dims"] = e.dims; // [[min, max], ...]
    if (!e.dtypes.empty()) {
      json names = json::array();
      for (int32_t d : e.dtypes) names.push_back(ninfer_dtype_name(d));
      entry["dtypes"] = names;
    }
    entries.push_back(std::move(entry));
  }
  json j = {{"buckets", rows},
            {"entries", entries},
            {"seconds", run.seconds},
            {"budget_exhausted", run.budget_exhausted},
            {"written_to", written_to}};
  if (table.device)
    j["device"] = {{"name", table.device->name},
                   {"sm_count", table.device->sm_count},
                   {"driver_version", table.device->driver_version},
                   {"plugin", table.device->plugin},
                   {"plugin_version", table.device->plugin_version}};
  fmt::print("{}\n", j.dump(2));
  std::fflush(stdout);
}

} // namespace ninfer::tools
