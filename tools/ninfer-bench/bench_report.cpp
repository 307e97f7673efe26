#include "bench_report.hpp"

#include "depth_growth.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <tuple>

namespace ninfer::tools {
namespace {

std::string percent(double got, double roof) { return roof > 0 ? fmt::format("{:.0f}%", 100.0 * got / roof) : "-"; }

// "acceptance 0.61 0.32 0.18, mean length 2.11"
std::string spec_summary(const SpecCounts& s) {
  std::string by_position;
  for (size_t j = 0; j < s.accepted_at.size(); ++j) by_position += fmt::format(" {:.2f}", s.acceptance(j));
  return fmt::format("acceptance{}, mean length {:.2f}", by_position, s.mean_accepted_length());
}

} // namespace

std::vector<VariantUse> variants_used(const Backend& be) {
  std::map<std::tuple<std::string, std::string, std::string>, int> count;
  for (const Plan* p : be.cached_plans()) ++count[{p->op, p->variant, p->source}];
  std::vector<VariantUse> out;
  for (const auto& [k, n] : count) out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), n});
  return out;
}

void print_table(const BenchSetup& s, const std::vector<BenchPoint>& points) {
  fmt::print("ninfer-bench: {} ({}, {:.2f} B parameters, {} weights{}, {} KV cache in blocks of {}) on {} with plugin "
             "{}\n",
             s.model, s.family, s.costs.parameters / 1e9, s.weights_dtype, s.random_weights ? ", random" : "", s.kv_dtype,
             s.kv_block_tokens, s.device, s.plugin);
  fmt::print("load {:.1f} s; max_context {}, {} sequence slot(s); CUDA graphs {}\n", s.load_seconds, s.max_context,
             s.max_sequences, s.cuda_graphs ? fmt::format("on ({} recorded)", s.graphs_recorded) : "off");
  fmt::print("memory: {}\n", s.memory.describe());
  fmt::print("bandwidth {:.1f} GB/s ({}); matmul {:.1f} TFLOP/s ({})\n", s.rates.bandwidth / 1e9,
             s.rates.bandwidth_how, s.rates.matmul / 1e12, s.rates.matmul_how);
  fmt::print("decode reads {:.2f} GB of weights per step, {:.1f} KB of KV per cached token, {:.2f} MB of state per "
             "sequence; prefill costs {:.2f} GFLOP per token\n\n",
             s.costs.weight_bytes_per_step / 1e9, s.costs.kv_bytes_per_token / 1e3, s.costs.state_bytes_per_seq / 1e6,
             s.costs.flop_per_token / 1e9);
  fmt::print("{:<8} {:>7} {:>8} {:>6} {:>12} {:>23} {:>14} {:>9}\n", "phase", "prompt", "context", "batch",
             "tok/s", "spread (min-max)", "roofline tok/s", "of roof");
  bool speculative = false;
  for (const BenchPoint& p : points) {
    fmt::print("{:<8} {:>7} {:>8} {:>6} {:>12.1f} {:>23} {:>14.1f} {:>9}{}\n", p.prefill ? "prefill" : "decode",
               p.prefill ? fmt::format("{}", p.tokens) : "-", p.prefill ? "-" : fmt::format("{}", p.context),
               p.batch, p.tok_s.median, fmt::format("{:.1f}-{:.1f}", p.tok_s.min, p.tok_s.max), p.roofline_tok_s,
               percent(p.tok_s.median, p.roofline_tok_s), p.spec.rows ? "  " + spec_summary(p.spec) : "");
    speculative = speculative || p.spec.rows;
  }
  if (speculative)
    fmt::print("decode points ran speculative rounds (drafts among token ids below {}, drafter's LM head {}): tok/s "
               "counts the tokens they produced, against the roofline of plain decode\n",
               s.draft_vocab, s.draft_head);
  if (!s.sampling.is_greedy())
    fmt::print("decode points sampled their tokens on the device: temperature {:g}, top-k {}, top-p {:g}, min-p {:g}\n",
               s.sampling.temperature, s.sampling.top_k, s.sampling.top_p, s.sampling.min_p);
  if (speculative && s.spec_acceptance)
    fmt::print("each round kept its drafts one by one with probability {:.2f} (--spec-acceptance), whatever they "
               "were: the engine's speed at that acceptance, not the drafter's\n",
               *s.spec_acceptance);
  if (speculative && s.spec_verify_only)
    fmt::print("rounds ran their verification pass alone (--spec-verify-only): no MTP head pass, the drafts "
               "verified were stale\n");
  // A round's time does not grow with depth as a step's does: depth growth is for plain decode.
  const std::vector<DepthGrowth> growth = speculative ? std::vector<DepthGrowth>{} : depth_growth(points, s.costs);
  if (!growth.empty())
    fmt::print("\ndecode step by context depth (the step time a deeper context adds, and the rate its added cache "
               "streams at):\n");
  for (const DepthGrowth& g : growth)
    fmt::print("  batch {:>2}, context {:>6} -> {:<6}: step {:>9.1f} -> {:>9.1f} us ({:+.1f}) for {:+.1f} MB of cache: "
               "{}\n",
               g.batch, g.from_context, g.to_context, g.from_step_us, g.to_step_us, g.to_step_us - g.from_step_us,
               g.added_kv_bytes / 1e6,
               g.added_bytes_per_s > 0 ? fmt::format("{:.1f} GB/s ({})", g.added_bytes_per_s / 1e9,
                                                     percent(g.added_bytes_per_s, s.rates.bandwidth) + " of bandwidth")
                                       : "no slower");
  fmt::print("\nvariants used (op / variant / chosen by / shapes):\n");
  for (const VariantUse& v : s.variants)
    fmt::print("  {:<18} {:<22} {:<34} {}\n", v.op, v.variant, v.source, v.shapes);
  std::fflush(stdout);
}

void print_json(const BenchSetup& s, const std::vector<BenchPoint>& points) {
  using nlohmann::json;
  json j;
  j["model"] = {{"name", s.model},
                {"family", s.family},
                {"parameters", s.costs.parameters},
                {"weights_dtype", s.weights_dtype},
                {"kv_dtype", s.kv_dtype},
                {"kv_block_tokens", s.kv_block_tokens},
                {"random_weights", s.random_weights}};
  j["device"] = s.device;
  j["plugin"] = s.plugin;
  j["cuda_graphs"] = s.cuda_graphs;
  j["cuda_graphs_recorded"] = s.graphs_recorded;
  j["max_context"] = s.max_context;
  j["max_sequences"] = s.max_sequences;
  j["load_seconds"] = s.load_seconds;
  j["sampling"] = {{"temperature", s.sampling.temperature},
                   {"top_k", s.sampling.top_k},
                   {"top_p", s.sampling.top_p},
                   {"min_p", s.sampling.min_p}};
  json mem;
  for (size_t i = 0; i < s.memory.in_use.size(); ++i)
    mem[memory_use_name(static_cast<MemoryUse>(i))] = s.memory.in_use[i];
  mem["total"] = s.memory.total;
  mem["device_free"] = s.memory.free;
  mem["plan_allocated"] = s.plan_allocated;
  mem["plan_total"] = s.plan_total;
  mem["device_taken_by_load"] = s.device_taken;
  j["memory_bytes"] = mem;
  j["rates"] = {{"bandwidth_bytes_per_s", s.rates.bandwidth},
                {"bandwidth_how", s.rates.bandwidth_how},
                {"matmul_flop_per_s", s.rates.matmul},
                {"matmul_how", s.rates.matmul_how}};
  j["costs"] = {{"weight_bytes_per_step", s.costs.weight_bytes_per_step},
                {"kv_bytes_per_token", s.costs.kv_bytes_per_token},
                {"state_bytes_per_sequence", s.costs.state_bytes_per_seq},
                {"prefill_flop_per_token", s.costs.flop_per_token}};
  json rows = json::array();
  for (const BenchPoint& p : points) {
    json r = {{"phase", p.prefill ? "prefill" : "decode"},
              {"tok_s", p.tok_s.median},
              {"tok_s_min", p.tok_s.min},
              {"tok_s_max", p.tok_s.max},
              {"roofline_tok_s", p.roofline_tok_s},
              {"fraction_of_roofline", p.roofline_tok_s > 0 ? p.tok_s.median / p.roofline_tok_s : 0.0}};
    if (p.prefill) r["prompt_tokens"] = p.tokens;
    else {
      r["context"] = p.context;
      r["batch"] = p.batch;
    }
    if (p.spec.rows) {
      json acceptance = json::array();
      for (size_t k = 0; k < p.spec.accepted_at.size(); ++k) acceptance.push_back(p.spec.acceptance(k));
      r["speculation"] = {{"draft_tokens", p.spec.accepted_at.size()},
                          {"draft_vocab", s.draft_vocab},
                          {"draft_head", s.draft_head},
                          {"rows", p.spec.rows},
                          {"acceptance_by_position", acceptance},
                          {"mean_accepted_length", p.spec.mean_accepted_length()}};
      if (s.spec_acceptance) r["speculation"]["forced_acceptance"] = *s.spec_acceptance;
      if (s.spec_verify_only) r["speculation"]["verify_only"] = true;
    }
    rows.push_back(r);
  }
  j["results"] = rows;
  json growth = json::array();
  for (const DepthGrowth& g : depth_growth(points, s.costs))
    growth.push_back({{"batch", g.batch},
                      {"from_context", g.from_context},
                      {"to_context", g.to_context},
                      {"from_step_us", g.from_step_us},
                      {"to_step_us", g.to_step_us},
                      {"added_kv_bytes", g.added_kv_bytes},
                      {"added_bytes_per_s", g.added_bytes_per_s}});
  j["decode_depth_growth"] = growth;
  json vars = json::array();
  for (const VariantUse& v : s.variants)
    vars.push_back({{"op", v.op}, {"variant", v.variant}, {"source", v.source}, {"shapes", v.shapes}});
  j["variants"] = vars;
  fmt::print("{}\n", j.dump(2));
  std::fflush(stdout);
}

} // namespace ninfer::tools
