// The memory plan: dry runs of the load (model_build.hpp on a plan_only backend) at a context,
// and the choice of the context the budget holds at the asked concurrency.
#include "ninfer/models/memory_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "model_build.hpp"
#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/models/mixed_chunk.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer {
namespace {

// An automatic context converges in two dry runs (at the model's positions, then at what the
// room left holds); more rounds only follow allocator rounding down to a context that fits.
constexpr int kMostRounds = 8;

// Decode recordings a run may make: one per batch size (1..max_sequences), context bucket
// (256, 512, ... up to max_context: Decoder::decode_bucket) and kind of pick (greedy, sampled),
// and with speculation twice as many again for the rounds (those that run their first draft
// pass and the chained ones that start from the last round's head rows); with more than one
// slot, mixed steps as many as decode steps of one row fewer (a chunk beside 1 .. slots - 1
// decoding sequences).
size_t decode_recordings(const ModelOptions& o) {
  size_t buckets = 1;
  for (int64_t b = kMinAutoContext; b < o.max_context; b *= 2) ++buckets;
  const auto slots = static_cast<size_t>(o.max_sequences);
  return slots * buckets * (o.speculation.on() ? 6 : 2) + (slots - 1) * buckets * 2;
}

MemoryReport dry_load(const Checkpoint& ck, const PlanTarget& t, const ModelOptions& o) {
  BackendOptions bo;
  bo.plan_only = true;
  bo.schedule = t.table;
  Backend be(*t.plugin, t.device, bo);
  const auto decoder = models::build_decoder(ck, be, o);
  return be.memory();
}

// Fills the parts of `p` from a dry run at p.options, and the KV tokens the budget leaves room for.
// With `auto_mixed`, p.options.mixed_chunk becomes the cost rule's for the weights as held and
// the context (ninfer/models/mixed_chunk.hpp), and the dry run is repeated when the chunk changes.
void measure(MemoryPlan& p, const Checkpoint& ck, const PlanTarget& t, bool auto_mixed) {
  ModelOptions& o = p.options;
  const int32_t kind = p.cuda ? NINFER_DEVICE_CUDA : NINFER_DEVICE_CPU;
  MemoryReport r = dry_load(ck, t, o);
  if (auto_mixed) {
    const double weights = static_cast<double>(r.in_use[static_cast<size_t>(MemoryUse::Weights)]);
    const int32_t chunk = mixed_chunk_rule(
        mixed_step_cost(ck.config(), weights, o.max_context, kind),
        o.prefill_chunk);
    const bool changed = chunk != o.mixed_chunk;
    o.mixed_chunk = chunk;
    if (changed && o.max_sequences > 1) r = dry_load(ck, t, o); // mixed steps exist with two slots or more
  }
  MemoryParts& parts = p.parts;
  parts = {};
  parts.exact = r.in_use;
  parts.weights_by_format = r.weights_by_format;
  parts.allocator = allocator_overhead(r, kind);
  parts.cuda_graphs = p.cuda && o.cuda_graphs ? decode_recordings(o) * kCudaGraphBytes : 0;
  parts.cuda_runtime = p.cuda && p.budget.limit ? kCudaRuntimeBytes : 0;
  p.kv_tokens = kv_pool_blocks(o) * kv_block_tokens(o);
  p.kv_bytes_per_token = parts.of(MemoryUse::KvCache) / static_cast<size_t>(p.kv_tokens);
  p.state_bytes_per_sequence = parts.of(MemoryUse::State) / static_cast<size_t>(o.max_sequences);

  // Room for the KV cache: what each bound leaves after every other part.
  const size_t others = parts.total() - parts.of(MemoryUse::KvCache);
  const size_t others_in_free = others - parts.cuda_runtime; // the runtime is already out of free memory
  int64_t room = std::numeric_limits<int64_t>::max();
  p.bound.clear();
  if (p.budget.limit) {
    room = static_cast<int64_t>(p.budget.limit) - static_cast<int64_t>(others);
    p.bound = fmt::format("the limit of {} ({})", format_bytes(p.budget.limit), p.budget.limit_source);
  }
  if (p.budget.free && static_cast<int64_t>(p.budget.free) - static_cast<int64_t>(others_in_free) < room) {
    room = static_cast<int64_t>(p.budget.free) - static_cast<int64_t>(others_in_free);
    p.bound = fmt::format("the free memory, {} ({})", format_bytes(p.budget.free), p.budget.free_source);
  }
  if (room == std::numeric_limits<int64_t>::max()) p.kv_tokens_fit = -1;
  else if (room < 0) p.kv_tokens_fit = 0;
  else p.kv_tokens_fit = p.kv_bytes_per_token ? room / static_cast<int64_t>(p.kv_bytes_per_token) : -1;
  p.room = room;
}

// The longest context for `per_sequence` tokens: the model's positions when they fit, else
// `per_sequence` rounded down to kAutoContextStep.
int64_t auto_context(int64_t per_sequence, int64_t positions) {
  if (per_sequence >= positions) return positions;
  return per_sequence >= kAutoContextStep ? per_sequence / kAutoContextStep * kAutoContextStep : per_sequence;
}

std::string tokens_bytes(int64_t tokens, size_t per_token) {
  return fmt::format("{} tokens ({})", tokens, format_bytes(static_cast<size_t>(tokens) * per_token));
}

// Why the plan does not fit, with the numbers; empty when it does.
std::string problem_of(const MemoryPlan& p, bool auto_context_asked) {
  const ModelOptions& o = p.options;
  const size_t per = p.kv_bytes_per_token;
  if (p.room < 0)
    return fmt::format("the model does not fit even without its KV cache: its other parts take {}, {} more than {}",
                       format_bytes(p.parts.total() - p.parts.of(MemoryUse::KvCache)),
                       format_bytes(static_cast<size_t>(-p.room)), p.bound);
  const int64_t block = kv_block_tokens(o);
  const int64_t one_sequence = (o.max_context + block - 1) / block * block;
  if (p.kv_capacity && p.kv_capacity < one_sequence)
    return fmt::format("a KV capacity of {} tokens is less than one sequence of max_context {} needs ({} tokens in "
                       "whole blocks of {}): raise kv_capacity or lower max_context",
                       p.kv_capacity, o.max_context, one_sequence, block);
  if (p.kv_tokens_fit < 0) return "";
  if (p.kv_capacity > p.kv_tokens_fit)
    return fmt::format("a KV capacity of {} does not fit: {} fit in what {} leaves", tokens_bytes(p.kv_capacity, per),
                       tokens_bytes(p.kv_tokens_fit, per), p.bound);
  const int64_t capacity = p.kv_capacity ? p.kv_capacity : p.kv_tokens_fit;
  const int64_t per_sequence = capacity / o.max_sequences;
  if (auto_context_asked && o.max_context < std::min(kMinAutoContext, p.max_positions))
    return fmt::format("at max_concurrency {} only {} tokens per sequence fit ({} in all, of {} per token); at least "
                       "{} are needed: lower max_concurrency or raise the memory",
                       o.max_sequences, per_sequence, tokens_bytes(capacity, per), format_bytes(per), kMinAutoContext);
  if (p.kv_tokens > capacity)
    return fmt::format("max_context {} x max_concurrency {} = {} of KV cache do not fit: {} fit{}; at max_concurrency "
                       "{} the longest context that fits is {}",
                       o.max_context, o.max_sequences, tokens_bytes(p.kv_tokens, per), tokens_bytes(capacity, per),
                       p.kv_capacity ? " (kv_capacity)" : " in what " + p.bound + " leaves", o.max_sequences,
                       auto_context(per_sequence, p.max_positions));
  return "";
}

} // namespace

int64_t kv_pool_blocks(const ModelOptions& o) {
  const int64_t block = kv_block_tokens(o);
  const int64_t per_sequence = (o.max_context + block - 1) / block;
  const int64_t all = per_sequence * o.max_sequences;
  if (o.kv_capacity <= 0) return all;
  // Beyond every slot's whole context the extra blocks hold the serving prefix cache's rows.
  return std::max(o.kv_capacity / block, per_sequence);
}

size_t MemoryParts::allocated() const {
  size_t n = 0;
  for (size_t b : exact) n += b;
  return n;
}

size_t MemoryParts::total() const { return allocated() + allocator + cuda_graphs + cuda_runtime; }

MemoryPlan plan_memory(const Checkpoint& ck, const PlanTarget& t, const ModelOptions& asked,
                       const MemoryBudget& budget) {
  const ModelConfig& cfg = ck.config();
  MemoryPlan p;
  p.model = family_name(cfg.family);
  p.device = t.memory_device.name;
  p.cuda = t.memory_device.kind == NINFER_DEVICE_CUDA;
  p.note = t.note;
  p.kv_capacity = asked.kv_capacity;
  p.max_positions = std::max<int64_t>(1, cfg.max_position_embeddings);
  p.budget = budget;
  ModelOptions& o = p.options;
  o = asked;
  // A stand-in plugin on the host plans a CUDA card's memory: its KV cache is the CUDA default.
  o.kv_cache = asked.kv_cache == KvCachePrecision::Auto && p.cuda && t.device.kind != NINFER_DEVICE_CUDA
                   ? KvCachePrecision::F16
                   : models::resolve_kv_cache(*t.plugin, t.device, asked.kv_cache);
  o.kv_block_tokens = kv_block_tokens(asked);
  const bool auto_ctx = asked.max_context == 0;
  const bool auto_mixed = asked.mixed_chunk == 0;
  // An asked capacity is a pool the sequences share: one of them may take all of it.
  if (auto_ctx)
    o.max_context = asked.kv_capacity ? std::max<int64_t>(1, auto_context(asked.kv_capacity, p.max_positions))
                                      : p.max_positions;
  for (int round = 0; round < kMostRounds; ++round) {
    measure(p, ck, t, auto_mixed);
    if (!auto_ctx || p.kv_tokens_fit < 0 || p.room < 0) break;
    const int64_t capacity = std::min(p.kv_tokens_fit, asked.kv_capacity ? asked.kv_capacity : p.kv_tokens_fit);
    if (p.kv_tokens <= capacity) break;
    const int64_t next = std::max<int64_t>(1, auto_context(capacity / o.max_sequences, p.max_positions));
    if (next >= o.max_context) break;
    o.max_context = next;
    if (next < std::min(kMinAutoContext, p.max_positions)) {
      measure(p, ck, t, auto_mixed);
      break;
    }
  }
  p.problem = problem_of(p, auto_ctx);
  return p;
}

} // namespace ninfer
