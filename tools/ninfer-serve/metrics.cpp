#include "metrics.hpp"

#include <fmt/format.h>

namespace ninfer::tools {
namespace {

constexpr std::chrono::seconds kWindow{60};

void metric(std::string& out, const char* name, const char* type, const char* help, const std::string& samples) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, samples);
}

} // namespace

void ServerMetrics::record(const serving::ServeResult& r) {
  std::lock_guard lock(mu_);
  ++requests_[r.finish_reason];
  prompt_tokens_ += r.prompt_tokens;
  cache_hits_ += r.cached_tokens > 0;
  cached_tokens_ += r.cached_tokens;
  const auto n = static_cast<int64_t>(r.generated_ids.size());
  generated_tokens_ += n;
  decode_seconds_ += r.timings.decode_s;
  const Clock::time_point now = Clock::now();
  recent_.emplace_back(now, n);
  while (!recent_.empty() && now - recent_.front().first > kWindow) recent_.pop_front();
}

std::string ServerMetrics::render(const serving::Engine& engine, const Backend& backend) const {
  const serving::EngineLoad load = engine.load();
  const MemoryReport mem = backend.memory();
  std::lock_guard lock(mu_);
  std::string out, by_reason;
  for (const auto& [reason, n] : requests_) by_reason += fmt::format("ninfer_requests_total{{finish_reason=\"{}\"}} {}\n", reason, n);
  metric(out, "ninfer_requests_total", "counter", "Finished requests by finish reason.", by_reason);
  metric(out, "ninfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         fmt::format("ninfer_prompt_tokens_total {}\n", prompt_tokens_));
  metric(out, "ninfer_prefix_cache_hits_total", "counter",
         "Finished requests that read the start of their prompt from their slot's earlier tokens or the prefix cache.",
         fmt::format("ninfer_prefix_cache_hits_total {}\n", cache_hits_));
  metric(out, "ninfer_prefix_cached_tokens_total", "counter",
         "Prompt tokens read from a slot or the prefix cache instead of computed.",
         fmt::format("ninfer_prefix_cached_tokens_total {}\n", cached_tokens_));
  metric(out, "ninfer_prefix_cache_blocks", "gauge", "KV blocks the prefix cache holds.",
         fmt::format("ninfer_prefix_cache_blocks {}\n", load.prefix_cache_blocks));
  metric(out, "ninfer_prefix_cache_evictable_blocks", "gauge",
         "KV blocks only the prefix cache holds (given back when an admission lacks free blocks).",
         fmt::format("ninfer_prefix_cache_evictable_blocks {}\n", load.prefix_cache_evictable));
  metric(out, "ninfer_prefix_cache_evictions_total", "counter", "KV blocks the prefix cache gave back for admissions.",
         fmt::format("ninfer_prefix_cache_evictions_total {}\n", load.prefix_cache_evictions));
  metric(out, "ninfer_generation_tokens_total", "counter", "Generated tokens of finished requests.",
         fmt::format("ninfer_generation_tokens_total {}\n", generated_tokens_));
  metric(out, "ninfer_decode_seconds_total", "counter", "Seconds finished requests spent decoding.",
         fmt::format("ninfer_decode_seconds_total {}\n", decode_seconds_));
  metric(out, "ninfer_queue_depth", "gauge", "Requests waiting for a slot or KV blocks.",
         fmt::format("ninfer_queue_depth {}\n", load.pending));
  metric(out, "ninfer_slots_in_use", "gauge", "Sequence slots (KV cache / GDN state) held by requests.",
         fmt::format("ninfer_slots_in_use {}\n", load.running));
  metric(out, "ninfer_slots_total", "gauge", "Sequence slots (--max-concurrency).", fmt::format("ninfer_slots_total {}\n", load.slots));
  metric(out, "ninfer_kv_cache_bytes", "gauge", "KV cache memory, allocated at load.",
         fmt::format("ninfer_kv_cache_bytes {}\n", mem.in_use[static_cast<size_t>(MemoryUse::KvCache)]));
  metric(out, "ninfer_kv_blocks_total", "gauge", "Blocks of the KV cache pool (ninfer_kv_block_tokens positions each).",
         fmt::format("ninfer_kv_blocks_total {}\n", load.kv_blocks_total));
  metric(out, "ninfer_kv_blocks_free", "gauge", "KV blocks no slot and not the prefix cache holds (a retired slot's kept rows are held).",
         fmt::format("ninfer_kv_blocks_free {}\n", load.kv_blocks_free));
  metric(out, "ninfer_kv_block_tokens", "gauge", "Positions per KV block.",
         fmt::format("ninfer_kv_block_tokens {}\n", load.kv_block_tokens));
  metric(out, "ninfer_state_bytes", "gauge", "Gated DeltaNet state memory, allocated at load.",
         fmt::format("ninfer_state_bytes {}\n", mem.in_use[static_cast<size_t>(MemoryUse::State)]));
  // The engine loop's counters: what ran on the device and what came back to the host.
  const SchedulerStats loop = engine.stats();
  metric(out, "ninfer_decode_steps_total", "counter", "Steps queued with decode rows (mixed steps included).",
         fmt::format("ninfer_decode_steps_total {}\n", loop.decode_steps));
  metric(out, "ninfer_decode_rows_total", "counter", "Rows (one token of one sequence) of those steps.",
         fmt::format("ninfer_decode_rows_total {}\n", loop.decode_rows));
  metric(out, "ninfer_chained_rows_total", "counter",
         "Decode rows fed by the previous step's pick on the device (the host had not read it).",
         fmt::format("ninfer_chained_rows_total {}\n", loop.chained_rows));
  metric(out, "ninfer_prompt_chunks_total", "counter", "Prompt chunks run.",
         fmt::format("ninfer_prompt_chunks_total {}\n", loop.prompt_chunks));
  metric(out, "ninfer_prefill_tokens_total", "counter",
         "Prompt tokens computed (those of the prompt chunks): a prompt the choices of a request share counts once.",
         fmt::format("ninfer_prefill_tokens_total {}\n", loop.prompt_tokens));
  metric(out, "ninfer_forked_choices_total", "counter",
         "Choices (n > 1) that copied their request's prompt from its first choice instead of reading it.",
         fmt::format("ninfer_forked_choices_total {}\n", loop.forks));
  metric(out, "ninfer_mixed_steps_total", "counter",
         "Steps that carried a prompt chunk and decode rows in one forward pass.",
         fmt::format("ninfer_mixed_steps_total {}\n", loop.mixed_steps));
  metric(out, "ninfer_logits_rows_total", "counter",
         "Logits rows brought to the host: tokens sampled there (penalties, top logprobs) and prompt logprobs.",
         fmt::format("ninfer_logits_rows_total {}\n", loop.logits_rows));
  // Speculative decoding (docs/speculative.md): rounds, their rows (a sequence's part of a
  // round), the tokens the rows produced, and per draft position the rows that accepted it.
  metric(out, "ninfer_spec_rounds_total", "counter", "Speculative rounds queued.",
         fmt::format("ninfer_spec_rounds_total {}\n", loop.spec_rounds));
  metric(out, "ninfer_spec_rows_total", "counter", "Rows of speculative rounds read (one sequence's part of a round).",
         fmt::format("ninfer_spec_rows_total {}\n", loop.spec.rows));
  metric(out, "ninfer_spec_tokens_total", "counter",
         "Tokens those rows produced: accepted drafts + the model's own next token each (their mean is the mean "
         "accepted length).",
         fmt::format("ninfer_spec_tokens_total {}\n", loop.spec.tokens));
  std::string accepted;
  for (size_t j = 0; j < loop.spec.accepted_at.size(); ++j)
    accepted += fmt::format("ninfer_spec_accepted_total{{position=\"{}\"}} {}\n", j + 1, loop.spec.accepted_at[j]);
  metric(out, "ninfer_spec_accepted_total", "counter",
         "Rows whose draft at this position (1 = the first draft) was accepted; over ninfer_spec_rows_total, the "
         "acceptance at that position.",
         accepted);
  int64_t recent_tokens = 0;
  const Clock::time_point now = Clock::now();
  for (const auto& [t, n] : recent_)
    if (now - t <= kWindow) recent_tokens += n;
  metric(out, "ninfer_generation_tokens_per_second", "gauge",
         "Tokens generated by requests finished in the last 60 s, per second.",
         fmt::format("ninfer_generation_tokens_per_second {}\n", static_cast<double>(recent_tokens) / kWindow.count()));
  return out;
}

} // namespace ninfer::tools
