#include "confirm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "ninfer/support/error.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/runtime/backend.hpp"
#include "tune_report.hpp"

namespace ninfer::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Median microseconds of a forward pass of each bucket's token count (a prompt of that many
// tokens into a fresh slot: every linear of the model runs at that width) under `table`.
std::vector<double> pass_times(const PluginHost& plugins, const ninfer_device_info& device, const std::string& plugin,
                               const Checkpoint& ck, const ScheduleTable& table, const std::vector<int64_t>& tokens,
                               const TuneOptions& o) {
  Backend be(plugins, device, BackendOptions{plugin, 0, &table, false});
  ModelOptions mo;
  mo.max_context = *std::max_element(tokens.begin(), tokens.end()) + 1;
  mo.max_sequences = 1;
  mo.prefill_chunk = o.prefill_chunk;
  mo.weights = WeightPrecision::BF16;
  auto lm = CausalLM::load(ck, be, mo);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(std::min<int64_t>(lm->vocab_size(), 151643) - 1));
  std::vector<double> out;
  for (int64_t t : tokens) {
    std::vector<int32_t> ids(static_cast<size_t>(t));
    for (auto& x : ids) x = id(rng);
    std::vector<double> us;
    for (int r = 0; r < 2 + o.repeats; ++r) {
      if (g_tune_interrupted) throw Error("interrupted");
      lm->reset(0);
      const auto t0 = Clock::now();
      lm->prefill(0, ids);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r >= 2) us.push_back(s * 1e6);
    }
    std::sort(us.begin(), us.end());
    out.push_back(us[us.size() / 2]);
  }
  return out;
}

} // namespace

void confirm_end_to_end(TuneRun& run, const PluginHost& plugins, const ninfer_device_info& device,
                        const std::string& plugin, const Checkpoint& ck, const ScheduleTable& builtin,
                        const ScheduleDevice& key, const TuneOptions& o) {
  std::vector<int64_t> tokens;
  for (const BucketResult& b : run.buckets)
    if (b.changes_route() && std::find(tokens.begin(), tokens.end(), b.tokens) == tokens.end())
      tokens.push_back(b.tokens);
  if (tokens.empty()) return;
  std::sort(tokens.begin(), tokens.end());
  const ScheduleTable candidate = tuned_table(run, builtin, key);
  if (!o.json) fmt::print(stderr, "ninfer-tune: confirming end to end (forward passes of {} token counts)\n", tokens.size());
  const std::vector<double> base = pass_times(plugins, device, plugin, ck, builtin, tokens, o);
  const std::vector<double> tuned = pass_times(plugins, device, plugin, ck, candidate, tokens, o);
  for (BucketResult& b : run.buckets) {
    const size_t i = static_cast<size_t>(std::find(tokens.begin(), tokens.end(), b.tokens) - tokens.begin());
    if (i == tokens.size()) continue;
    b.builtin_pass_us = base[i];
    b.tuned_pass_us = tuned[i];
    if (tuned[i] > base[i] && b.changes_route()) {
      b.reverted = true;
      b.tuned_variant.clear(); // the built-in entries serve this bucket, every matrix of it
      b.matrices.clear();
    }
  }
}

} // namespace ninfer::tools
