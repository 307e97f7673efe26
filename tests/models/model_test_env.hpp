// What the model tests share: the CPU backend, a fixture (checkpoint + reference.json +
// reference.safetensors), logits rows, and the comparisons the fixtures README prescribes.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/safetensors_file.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "test_support.hpp"

namespace ninfer::test {

// float32 engine arithmetic vs the float64 reference (tests/fixtures/README.md).
inline constexpr double kFixtureLogitsF32 = 1e-3;
// bfloat16 weights: relative L2 error per logits row (README guidance).
inline constexpr double kFixtureRowRelL2Bf16 = 2e-2;
// Reference greedy steps whose top-2 margin is at most this may flip on rounding.
inline constexpr double kGreedyMargin = 1e-2;

inline const PluginHost& model_test_plugins() { return build_plugins(); }

inline Backend cpu_model_backend() {
  const LoadedPlugin* cpu = model_test_plugins().find("cpu");
  if (!cpu) throw std::runtime_error("no cpu plugin in " + plugin_dir().string());
  return Backend(*cpu, host_device());
}

// The backend the fixture tests run on. models_cpu_tests: the CPU plugin. gpu_model_tests
// (the same source compiled with NINFER_FIXTURES_ON_CUDA): the CUDA plugin chosen for device 0,
// so the same fixture checks run unchanged on both; `why_not` says why it cannot be had.
inline std::unique_ptr<Backend> fixture_backend(std::string* why_not = nullptr) {
#ifdef NINFER_FIXTURES_ON_CUDA
  const Discovery d = discover_devices();
  if (d.cuda.empty()) {
    if (why_not) *why_not = "no CUDA device (" + d.note + ")";
    return nullptr;
  }
  BackendOptions o;
  o.plugin = forced_test_plugin(); // $NINFER_TEST_PLUGIN, e.g. cuda-generic
  return std::make_unique<Backend>(model_test_plugins(), d.cuda.front(), o);
#else
  (void)why_not;
  const LoadedPlugin* cpu = model_test_plugins().find("cpu");
  if (!cpu) throw std::runtime_error("no cpu plugin in " + plugin_dir().string());
  return std::make_unique<Backend>(*cpu, host_device());
#endif
}

#define NINFER_FIXTURE_BACKEND(var)                         \
  std::string var##_why_not;                                \
  auto var = ::ninfer::test::fixture_backend(&var##_why_not); \
  if (!var) GTEST_SKIP() << var##_why_not

struct FixtureCase {
  std::vector<int32_t> prompt, greedy;
  std::vector<double> margin;
  std::vector<float> prompt_logits, full_logits; // [rows, vocab]
};

struct Fixture {
  std::string name;
  Checkpoint checkpoint;
  std::vector<FixtureCase> cases;
  int64_t vocab = 0;

  // `name`: a folder of tests/fixtures, or a path from the repository root when it has a slash
  // (the trained demo model, models/qwen3_5-demo, carries a reference of the same form).
  static Fixture load(const std::string& name) {
    const auto dir = name.find('/') == std::string::npos ? fixtures_dir() / name : source_dir() / name;
    Fixture f{name, Checkpoint::open(dir), {}, 0};
    f.vocab = f.checkpoint.config().vocab_size;
    std::ifstream in(dir / "reference.json");
    const auto ref = nlohmann::json::parse(in);
    const SafetensorsFile logits = SafetensorsFile::open(dir / "reference.safetensors");
    for (size_t i = 0; i < ref.at("cases").size(); ++i) {
      const auto& c = ref["cases"][i];
      FixtureCase fc;
      fc.prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
      fc.greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
      fc.margin = c.at("greedy_top2_margin").get<std::vector<double>>();
      fc.prompt_logits = to_f32(logits.tensor("case" + std::to_string(i) + ".prompt_logits"));
      fc.full_logits = to_f32(logits.tensor("case" + std::to_string(i) + ".full_logits"));
      f.cases.push_back(std::move(fc));
    }
    return f;
  }
};

// The fixture's checkpoint on `be` with these limits (the other options at their defaults).
inline std::unique_ptr<CausalLM> fixture_model(Backend& be, const Fixture& fx, int64_t max_context,
                                               int32_t max_sequences, int32_t prefill_chunk = 512) {
  ModelOptions o;
  o.max_context = max_context;
  o.max_sequences = max_sequences;
  o.prefill_chunk = prefill_chunk;
  return CausalLM::load(fx.checkpoint, be, o);
}

// Row r of a [rows, vocab] matrix.
inline std::vector<float> row(const std::vector<float>& m, int64_t r, int64_t vocab) {
  return {m.begin() + r * vocab, m.begin() + (r + 1) * vocab};
}

// max |got - want|; NaN or Inf in got counts as infinite.
inline double max_abs_diff(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    m = std::max(m, std::fabs(double(got[i]) - want[i]));
  }
  return m;
}

// Relative L2 distance of two rows (vectors or slices of a logits matrix); infinite at any
// element of `got` that is not finite.
inline double rel_l2(std::span<const float> got, std::span<const float> want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

// The message of the ninfer::Error that f throws; "" when it throws none (the caller's check of
// the message then fails).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One decode step through CausalLM::queue_step with every row's logits brought to the host:
// [slots.size(), vocab], what a host sampler reads. Throws what queue_step throws.
inline std::vector<float> decode_logits(CausalLM& lm, std::span<const int32_t> slots, std::span<const int32_t> ids) {
  if (lm.unread_results()) throw std::logic_error("decode_logits: earlier steps have results unread");
  std::vector<StepRow> rows;
  for (size_t i = 0; i < slots.size(); ++i)
    rows.push_back({.slot = slots[i], .ids = i < ids.size() ? ids.subspan(i, 1) : ids.subspan(0, 0), .logits = true});
  lm.queue_step(rows);
  return lm.next_result().logits;
}

// One decode step picked on the backend and read at once: row i greedy (`sampling` empty) or
// drawn under sampling[i]. Returns the ids; their log-probabilities go to `logprobs`.
inline std::vector<int32_t> decode_picks(CausalLM& lm, std::span<const int32_t> slots, std::span<const int32_t> ids,
                                         std::span<const RowSampling> sampling = {},
                                         std::vector<float>* logprobs = nullptr) {
  if (lm.unread_results()) throw std::logic_error("decode_picks: earlier steps have results unread");
  std::vector<StepRow> rows;
  for (size_t i = 0; i < slots.size(); ++i) {
    rows.push_back({.slot = slots[i], .ids = ids.subspan(i, 1)});
    if (!sampling.empty()) rows.back().sampling = sampling[i];
  }
  lm.queue_step(rows);
  StepResult r = lm.next_result();
  if (logprobs) *logprobs = std::move(r.logprobs);
  return r.ids;
}

inline int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

} // namespace ninfer::test
