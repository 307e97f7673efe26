#include "bench_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "ninfer/manifest/manifest.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int32_t kWarmupSteps = 4; // decode steps per --warmup run

Spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

// Random ids below the tokenizer's specials: the cost of a token does not depend on its id.
std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(std::min<int64_t>(vocab, 151643) - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = id(rng);
  return ids;
}

// Row i's pick: --temperature and its filters, each row a draw stream of its own.
RowSampling bench_sampling(const BenchOptions& o, int32_t row) {
  return row_sampling(o.sampling, o.seed * 1000003u + static_cast<uint64_t>(row), 0);
}

void progress(const BenchOptions& o, const std::string& what) {
  if (!o.json) fmt::print(stderr, "  measuring {}\n", what);
}

BenchPoint bench_prefill(CausalLM& lm, const BenchOptions& o, int64_t tokens) {
  progress(o, fmt::format("prefill of {} tokens", tokens));
  const std::vector<int32_t> ids = random_ids(tokens, lm.vocab_size(), o.seed + static_cast<uint64_t>(tokens));
  std::vector<double> rates;
  for (int r = 0; r < o.warmup + o.repeats; ++r) {
    lm.reset(0);
    const auto t0 = Clock::now();
    lm.prefill(0, ids, LogitsFor::Last); // returns after the logits reach the host
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r >= o.warmup) rates.push_back(static_cast<double>(tokens) / s);
  }
  lm.reset(0);
  BenchPoint p;
  p.prefill = true;
  p.tokens = tokens;
  p.tok_s = spread_of(rates);
  return p;
}

// Speculative rounds on a fixed batch: the engine loop's (generation::Scheduler) rounds, each
// read before the next is queued (its accepted drafts set the positions); the first takes each
// sequence's input from the host, every later one the pick the last left on the device.
// Aggregate tok/s counts the tokens the rounds produced.
BenchPoint bench_rounds(CausalLM& lm, const BenchOptions& o, int64_t context, int32_t batch) {
  progress(o, fmt::format("speculative rounds of {} sequence(s) at context {}", batch, context));
  const std::vector<int32_t> ids = random_ids(batch, lm.vocab_size(), o.seed + 7);
  std::vector<SpecRow> first, chained;
  for (int32_t i = 0; i < batch; ++i) {
    first.push_back({.slot = i, .id = ids[static_cast<size_t>(i)], .sampling = bench_sampling(o, i)});
    chained.push_back({.slot = i, .sampling = bench_sampling(o, i)});
  }
  const int32_t drafts = lm.options().speculation.draft_tokens;
  // --spec-acceptance: each row's accepted count drawn per round, the drafts kept one by one.
  std::mt19937_64 rng(o.seed + 11);
  std::bernoulli_distribution keep(o.spec_acceptance.value_or(0));
  auto force = [&](std::vector<SpecRow>& round) {
    if (!o.spec_acceptance) return;
    for (SpecRow& r : round) {
      int32_t a = 0;
      while (a < drafts && keep(rng)) ++a;
      r.forced_accept = a;
    }
  };
  std::vector<double> rates;
  BenchPoint p;
  // A round continues a sequence: context 0 runs after one assumed token.
  const int64_t at = std::max<int64_t>(context, 1);
  for (int r = 0; r < o.warmup + o.repeats; ++r) {
    for (int32_t s = 0; s < batch; ++s) {
      lm.reset(s);
      lm.assume_context(s, at);
    }
    const bool timed = r >= o.warmup;
    const int32_t rounds = timed ? o.decode_steps : kWarmupSteps;
    int64_t tokens = 0;
    const auto t0 = Clock::now();
    for (int32_t i = 0; i < rounds; ++i) {
      std::vector<SpecRow>& round = i == 0 ? first : chained;
      for (SpecRow& row : round) row.sampling.draw = static_cast<uint64_t>(i) * (drafts + 1); // fresh draws
      force(round);
      lm.queue_spec_round(round);
      const StepResult res = lm.next_result();
      for (int32_t id : res.ids)
        if (id < 0) throw Error("a verification pass produced NaN logits: the timings would mean nothing");
      for (int32_t a : res.accepted) {
        tokens += int64_t{a} + 1;
        if (timed) p.spec.add(a, drafts);
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (timed) rates.push_back(static_cast<double>(tokens) / s);
  }
  for (int32_t s = 0; s < batch; ++s) lm.reset(s);
  p.context = context;
  p.batch = batch;
  p.tok_s = spread_of(rates);
  return p;
}

BenchPoint bench_decode(CausalLM& lm, const BenchOptions& o, int64_t context, int32_t batch) {
  if (lm.options().speculation.on()) return bench_rounds(lm, o, context, batch);
  progress(o, fmt::format("decode of {} sequence(s) at context {}", batch, context));
  std::vector<int32_t> slots(static_cast<size_t>(batch));
  for (int32_t i = 0; i < batch; ++i) slots[static_cast<size_t>(i)] = i;
  std::vector<int32_t> ids = random_ids(batch, lm.vocab_size(), o.seed + 7);
  // The first step's ids from the host, every later one from the previous picks (greedy, or
  // sampled on the device with --temperature).
  std::vector<StepRow> first, chained;
  for (int32_t i = 0; i < batch; ++i) {
    first.push_back({.slot = i, .ids = std::span(&ids[static_cast<size_t>(i)], 1), .sampling = bench_sampling(o, i)});
    chained.push_back({.slot = i, .sampling = bench_sampling(o, i)});
  }
  std::vector<double> rates;
  for (int r = 0; r < o.warmup + o.repeats; ++r) {
    for (int32_t s : slots) {
      lm.reset(s);
      lm.assume_context(s, context);
    }
    const bool timed = r >= o.warmup;
    const int32_t steps = timed ? o.decode_steps : kWarmupSteps;
    // The engine loop's decode steps (generation::Scheduler) on a fixed batch: every step's ids
    // reach the host, and the next step is queued, fed by those picks on the device, before the
    // host reads them.
    const auto t0 = Clock::now();
    lm.queue_step(first);
    for (int32_t i = 0; i < steps; ++i) {
      for (StepRow& row : chained) row.sampling.draw = static_cast<uint64_t>(i) + 1; // a fresh draw a step
      if (i + 1 < steps) lm.queue_step(chained);
      for (int32_t id : lm.next_result().ids)
        if (id < 0) throw Error("a decode step produced NaN logits: the timings would mean nothing");
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (timed) rates.push_back(static_cast<double>(batch) * steps / s);
  }
  for (int32_t s : slots) lm.reset(s);
  BenchPoint p;
  p.context = context;
  p.batch = batch;
  p.tok_s = spread_of(rates);
  return p;
}

// Positions a decode point writes past its context: a step one each, a speculative round up to
// its drafts + 1 (every draft accepted).
int64_t decode_positions(const BenchOptions& o) {
  const int64_t per = o.spec.method == "mtp" ? o.spec.draft_tokens.value_or(SpecSettings{}.draft_tokens) + 1 : 1;
  return std::max<int64_t>(o.decode_steps, kWarmupSteps) * per + 1;
}

} // namespace

void fit_to_model(BenchOptions& o, int64_t positions) {
  if (positions <= 0) return;
  auto drop = [&](std::vector<int64_t>& v, int64_t extra, const char* what) {
    std::vector<int64_t> kept;
    for (int64_t x : v) {
      if (x + extra <= positions) kept.push_back(x);
      else fmt::print(stderr, "ninfer-bench: skipping {} {}: beyond the model's max_position_embeddings = {}\n", what, x, positions);
    }
    v = kept;
  };
  if (!o.skip_prefill) drop(o.prompt_lengths, 0, "prompt length");
  if (!o.skip_decode) drop(o.contexts, decode_positions(o), "decode context");
  if ((o.skip_prefill || o.prompt_lengths.empty()) && (o.skip_decode || o.contexts.empty()))
    throw Error(fmt::format("no measurement fits the model's max_position_embeddings = {}; lower --prompt-lengths / "
                            "--contexts", positions));
  o.skip_prefill = o.skip_prefill || o.prompt_lengths.empty();
  o.skip_decode = o.skip_decode || o.contexts.empty();
}

int64_t needed_context(const BenchOptions& o) {
  int64_t need = 1;
  if (!o.skip_prefill) need = std::max(need, *std::max_element(o.prompt_lengths.begin(), o.prompt_lengths.end()));
  if (!o.skip_decode) need = std::max(need, *std::max_element(o.contexts.begin(), o.contexts.end()) + decode_positions(o));
  return need;
}

int32_t needed_sequences(const BenchOptions& o) {
  if (o.skip_decode) return 1;
  return static_cast<int32_t>(*std::max_element(o.batches.begin(), o.batches.end()));
}

std::vector<BenchPoint> run_benchmarks(CausalLM& lm, const BenchOptions& o, const ModelCosts& costs,
                                       const DeviceRates& rates) {
  std::vector<BenchPoint> out;
  if (!o.skip_prefill)
    for (int64_t t : o.prompt_lengths) {
      out.push_back(bench_prefill(lm, o, t));
      out.back().roofline_tok_s = prefill_roofline(costs, rates);
    }
  if (!o.skip_decode)
    for (int64_t c : o.contexts)
      for (int64_t b : o.batches) {
        out.push_back(bench_decode(lm, o, c, static_cast<int32_t>(b)));
        out.back().roofline_tok_s = decode_roofline(costs, rates, static_cast<int32_t>(b), c);
      }
  return out;
}

} // namespace ninfer::tools
