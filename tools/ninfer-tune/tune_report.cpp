#include "tune_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>

namespace ninfer::tools {

ScheduleTable tuned_table(const TuneRun& run, const ScheduleTable& builtin, const ScheduleDevice& device) {
  ScheduleTable t;
  t.arch = builtin.arch;
  t.device = device;
  std::string op;
  int64_t prev = 0;
  for (const BucketResult& b : run.buckets) {
    if (b.op != op) {
      op = b.op;
      prev = 0;
    }
    const int64_t lo = prev + 1;
    prev = b.tokens;
    if (b.tuned_variant.empty()) continue;
    if (!t.entries.empty()) {
      ScheduleEntry& last = t.entries.back();
      if (last.op == b.op && last.variant == b.tuned_variant && last.tokens_max + 1 == lo) {
        last.tokens_max = b.tokens;
        continue;
      }
    }
    t.entries.push_back({b.op, lo, b.tokens, b.tuned_variant, std::nullopt, ""});
  }
  for (const ScheduleEntry& e : builtin.entries) t.entries.push_back(e);
  return t;
}

void print_summary(const TuneRun& run) {
  fmt::print("{:<12} {:>7} {:>22} {:>10} {:>22} {:>10} {:>8} {:>22}\n", "op", "tokens", "built-in choice", "us",
             "tuned choice", "us", "speed-up", "pass us built-in/tuned");
  for (const BucketResult& b : run.buckets) {
    const std::string pass = b.builtin_pass_us > 0 ? fmt::format("{:.0f}/{:.0f}", b.builtin_pass_us, b.tuned_pass_us) : "-";
    const std::string tuned = b.reverted ? "(built-in kept)" : b.tuned_variant.empty() ? "-" : b.tuned_variant;
    fmt::print("{:<12} {:>7} {:>22} {:>10.1f} {:>22} {:>10.1f} {:>7.2f}x {:>22}\n", b.op, b.tokens, b.default_variant,
               b.default_us, tuned, b.tuned_us, b.tuned_us > 0 ? b.default_us / b.tuned_us : 0.0, pass);
  }
  bool any = false;
  for (const BucketResult& b : run.buckets)
    for (const std::string& x : b.excluded) {
      if (!any) fmt::print("\nexcluded:\n");
      any = true;
      fmt::print("  {} tokens {}: {}\n", b.op, b.tokens, x);
    }
  fmt::print("\n{:.1f} s of measurements{}\n", run.seconds,
             run.budget_exhausted ? "; --budget-seconds ran out: the remaining buckets keep the built-in choice" : "");
  std::fflush(stdout);
}

void print_summary_json(const TuneRun& run, const ScheduleTable& table, const std::string& written_to) {
  using nlohmann::json;
  json rows = json::array();
  for (const BucketResult& b : run.buckets) {
    json all = json::object();
    for (const auto& [v, us] : b.all_us) all[v] = us;
    rows.push_back({{"op", b.op},
                    {"tokens", b.tokens},
                    {"default_variant", b.default_variant},
                    {"default_us", b.default_us},
                    {"tuned_variant", b.tuned_variant},
                    {"tuned_us", b.tuned_us},
                    {"speedup", b.tuned_us > 0 ? b.default_us / b.tuned_us : 0.0},
                    {"variants_us", all},
                    {"builtin_pass_us", b.builtin_pass_us},
                    {"tuned_pass_us", b.tuned_pass_us},
                    {"reverted", b.reverted},
                    {"excluded", b.excluded}});
  }
  json entries = json::array();
  for (const ScheduleEntry& e : table.entries) {
    json entry = {{"op", e.op}, {"tokens", {e.tokens_min, e.tokens_max}}, {"variant", e.variant}};
    if (!e.dims.empty()) entry["dims"] = e.dims; // [[min, max], ...]
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
