#include "tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string_view>

#include "ninfer/support/error.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "op_cases.hpp"

namespace ninfer::tools {

std::atomic<bool> g_tune_interrupted{false};

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kBurstSeconds = 2e-3; // each timed replay lasts about this long

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check_interrupt() {
  if (g_tune_interrupted) throw Error("interrupted");
}

// Per-launch microseconds of `variant`: a burst of n launches (rotating the weight copies) is
// recorded once and replayed; the median of the repeats, divided by n.
double time_variant(Backend& be, OpCase& c, const std::string& variant, int64_t t, int repeats) {
  const ninfer_shape s = c.shape(t);
  auto launch = [&](int i) { be.run_variant(c.op(), variant, s, c.args(t, i % c.copies())); };
  auto t0 = Clock::now();
  launch(0);
  be.synchronize();
  const double one = std::max(since(t0), 1e-6);
  const int n = static_cast<int>(std::clamp(kBurstSeconds / one, 1.0, 64.0));
  std::shared_ptr<const Backend::Recording> rec;
  if (be.can_record()) rec = be.record([&] {
      for (int i = 0; i < n; ++i) launch(i);
    });
  auto burst = [&] {
    const auto b0 = Clock::now();
    if (rec) be.replay(*rec);
    else
      for (int i = 0; i < n; ++i) launch(i);
    be.synchronize();
    return since(b0) / n * 1e6;
  };
  burst(); // warm-up
  std::vector<double> us;
  for (int r = 0; r < repeats; ++r) us.push_back(burst());
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

} // namespace

TuneRun run_tuning(Backend& be, Backend& cpu, const std::vector<ShapeToTune>& shapes, const TuneOptions& o) {
  TuneRun run;
  const auto start = Clock::now();
  const int64_t l2 = be.device().l2_bytes > 0 ? be.device().l2_bytes : (64 << 20);
  for (const std::string& op : o.ops) {
    // Each weight dtype of the op apart: float and quantized matrices have variants of their own.
    std::set<int32_t> dtypes;
    for (const auto& s : shapes)
      if (s.op == op) dtypes.insert(s.shape.dtype);
    for (const int32_t dtype : dtypes) {
      std::vector<const ShapeToTune*> mine;
      for (const auto& s : shapes)
        if (s.op == op && s.shape.dtype == dtype) mine.push_back(&s);
      // Inputs per shape, sized for the largest bucket that shape runs at.
      std::vector<std::unique_ptr<OpCase>> cases;
      for (const ShapeToTune* s : mine) {
        const int64_t max_t = std::min<int64_t>(s->shape.tokens, o.buckets.back());
        cases.push_back(make_op_case(be, s->shape, s->quant, op, max_t, l2, 1234));
        if (!cases.back())
          throw Error(fmt::format("op '{}' cannot be tuned (supported: linear, norm_linear, gdn_gating)", op));
      }
      // The plugin's variants that take this dtype, then (--jit-sweep) run-time compiled ones,
      // built at first use (NVRTC or the kernel cache) and from then on treated exactly alike.
      // `emulate_*` variants reproduce another plugin's rounding for tests (docs/plugins.md):
      // never a route, so never a candidate, however fast.
      std::vector<std::string> plugin_variants;
      for (const ninfer_variant* v : be.plugin().variants_for(op))
        if (std::string_view(v->name).rfind("emulate_", 0) != 0 && (v->dtype_mask >> dtype & 1u))
          plugin_variants.push_back(v->name);
      for (int64_t t : o.buckets) {
        check_interrupt();
        if (since(start) > o.budget_seconds) {
          run.budget_exhausted = true;
          break;
        }
        BucketResult b;
        b.op = op;
        b.dtype = dtype;
        b.tokens = t;
        std::set<std::string> defaults;
        std::map<std::string, int> shapes_ok;
        std::vector<MatrixTimes> shape_us(mine.size());
        int shapes_here = 0;
        for (size_t i = 0; i < mine.size(); ++i) {
          if (t > mine[i]->shape.tokens) continue; // the model never runs this shape this wide
          ++shapes_here;
          OpCase& c = *cases[i];
          for (size_t k = 0; k < shape_us[i].dims.size(); ++k) shape_us[i].dims[k] = c.shape(t).dims[k];
          const std::string dflt = be.planner().plan(op, c.shape(t)).variant;
          defaults.insert(dflt);
          std::vector<std::string> names = plugin_variants;
          // The run-time compiled GEMVs take float weights only.
          if (o.jit_sweep && !ninfer_dtype_is_quantized(dtype))
            for (std::string& n : be.plugin().sweep_variant_names(op, t)) names.push_back(std::move(n));
          for (const std::string& name : names) {
            check_interrupt();
            const ninfer_variant* v = nullptr;
            try {
              v = be.plugin().resolve_variant(be.device(), op, name);
            } catch (const Error& e) {
              const std::string why = fmt::format("{}: cannot be built: {}", name, e.what());
              if (std::find(b.excluded.begin(), b.excluded.end(), why) == b.excluded.end()) b.excluded.push_back(why);
              continue;
            }
            try {
              (void)be.planner().plan_variant(*v, c.shape(t));
            } catch (const Error& e) {
              b.excluded.push_back(fmt::format("{} ({}x{}): not planned for this shape: {}", name, c.shape(t).dims[0],
                                               c.shape(t).dims[1], e.what()));
              continue;
            }
            try {
              be.run_variant(op, name, c.shape(t), c.args(t, 0));
            } catch (const Error& e) { // the variant refused the call's arguments
              b.excluded.push_back(fmt::format("{} ({}x{}): refused the call: {}", name, c.shape(t).dims[0],
                                               c.shape(t).dims[1], e.what()));
              continue;
            }
            const double err = c.error_vs_reference(cpu, t);
            double& worst = b.error[name];
            worst = std::isnan(err) ? err : std::max(worst, err);
            if (!(err <= OpCase::kTolerance)) {
              b.excluded.push_back(fmt::format("{} ({}x{}): WRONG, relative L2 {:.3g} from the CPU reference", name,
                                               c.shape(t).dims[0], c.shape(t).dims[1], err));
              continue;
            }
            const double us = time_variant(be, c, name, t, o.repeats);
            b.all_us[name] += us;
            shape_us[i].us[name] = us;
            ++shapes_ok[name];
            if (name == dflt) b.default_us += us;
          }
        }
        if (shapes_here == 0) continue;
        for (auto it = b.all_us.begin(); it != b.all_us.end();)
          it = shapes_ok[it->first] == shapes_here ? std::next(it) : b.all_us.erase(it);
        for (const auto& d : defaults) b.default_variant += (b.default_variant.empty() ? "" : "/") + d;
        for (const auto& [name, us] : b.all_us)
          if (b.tuned_variant.empty() || us < b.tuned_us) {
            b.tuned_variant = name;
            b.tuned_us = us;
          }
        if (o.by_matrix && !b.tuned_variant.empty()) b.matrices = matrix_choices(shape_us, b.tuned_variant);
        if (!o.json) {
          fmt::print(stderr, "  {} {} tokens {:>5}: default {} {:.1f} us, best {} {:.1f} us\n", op,
                     ninfer_dtype_name(dtype), t, b.default_variant, b.default_us,
                     b.tuned_variant.empty() ? "-" : b.tuned_variant, b.tuned_us);
          for (const MatrixChoice& m : b.matrices)
            fmt::print(stderr, "    {}: {} {:.1f} us ({} {:.1f} us)\n", matrix_name(m.dims), m.variant, m.us,
                       b.tuned_variant, m.bucket_us);
        }
        run.buckets.push_back(std::move(b));
      }
      if (run.budget_exhausted) break;
    }
    if (run.budget_exhausted) break;
  }
  run.seconds = since(start);
  return run;
}

} // namespace ninfer::tools
