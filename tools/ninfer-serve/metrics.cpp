#include "metrics.hpp"

#include <fmt/format.h>

namespace ninfer::tools {
namespace {

constexpr std::chrono::seconds kWindow{60};

void metric(std::string& out, const char* name, const char* type, const char* help, const std::string& samples) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, samples);
}

// A metric of one unlabelled sample.
template <class T>
void metric_value(std::string& out, const char* name, const char* type, const char* help, const T& value) {
  metric(out, name, type, help, fmt::format("{} {}\n", name, value));
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
  metric_value(out, "ninfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", prompt_tokens_);
  metric_value(out, "ninfer_prefix_cache_hits_total", "counter",
               "Finished requests that read the start of their prompt from their slot's earlier tokens or the prefix cache.",
               cache_hits_);
  metric_value(out, "ninfer_prefix_cached_tokens_total", "counter",
               "Prompt tokens read from a slot or the prefix cache instead of computed.", cached_tokens_);
  metric_value(out, "ninfer_prefix_cache_blocks", "gauge",
               "KV blocks the prefix cache holds.", load.prefix_cache_blocks);
  metric_value(out, "ninfer_prefix_cache_evictable_blocks", "gauge",
               "KV blocks only the prefix cache holds (given back when an admission lacks free blocks).",
               load.prefix_cache_evictable);
  metric_value(out, "ninfer_prefix_cache_evictions_total", "counter",
               "KV blocks the prefix cache gave back for admissions.", load.prefix_cache_evictions);
  metric_value(out, "ninfer_prefix_cache_states", "gauge",
               "Gated DeltaNet state copies the prefix cache holds (--prefix-states).", load.prefix_cache_states);
  metric_value(out, "ninfer_prefix_cache_state_evictions_total", "counter",
               "State copies the prefix cache gave up for newer ones.", load.prefix_cache_state_evictions);
  if (load.host.bytes) {
    metric_value(out, "ninfer_host_cache_blocks", "gauge", "KV blocks the prefix cache's host tier holds.",
                 load.host.blocks);
    metric_value(out, "ninfer_host_cache_states", "gauge", "State copies the prefix cache's host tier holds.",
                 load.host.states);
    metric_value(out, "ninfer_host_cache_restored_blocks_total", "counter",
                 "KV blocks copied back from the host tier for a match.", load.host.restored_blocks);
    metric_value(out, "ninfer_host_cache_restored_states_total", "counter",
                 "State copies copied back from the host tier for a match.", load.host.restored_states);
    metric_value(out, "ninfer_host_cache_restore_bytes_per_second", "gauge",
                 "Host-to-device restore bandwidth, measured at start.", load.host_restore_bytes_per_s);
  }
  metric_value(out, "ninfer_generation_tokens_total", "counter",
               "Generated tokens of finished requests.", generated_tokens_);
  metric_value(out, "ninfer_decode_seconds_total", "counter",
               "Seconds finished requests spent decoding.", decode_seconds_);
  metric_value(out, "ninfer_queue_depth", "gauge", "Requests waiting for a slot or KV blocks.", load.pending);
  metric_value(out, "ninfer_slots_in_use", "gauge",
               "Sequence slots (KV cache / GDN state) held by requests.", load.running);
  metric_value(out, "ninfer_slots_total", "gauge", "Sequence slots (--max-concurrency).", load.slots);
  metric_value(out, "ninfer_kv_cache_bytes", "gauge",
               "KV cache memory, allocated at load.", mem.in_use[static_cast<size_t>(MemoryUse::KvCache)]);
  metric_value(out, "ninfer_kv_blocks_total", "gauge",
               "Blocks of the KV cache pool (ninfer_kv_block_tokens positions each).", load.kv_blocks_total);
  metric_value(out, "ninfer_kv_blocks_free", "gauge",
               "KV blocks no slot and not the prefix cache holds (a retired slot's kept rows are held).",
               load.kv_blocks_free);
  metric_value(out, "ninfer_kv_block_tokens", "gauge", "Positions per KV block.", load.kv_block_tokens);
  metric_value(out, "ninfer_state_bytes", "gauge",
               "Gated DeltaNet state memory, allocated at load.", mem.in_use[static_cast<size_t>(MemoryUse::State)]);
  // The engine loop's counters: what ran on the device and what came back to the host.
  const SchedulerStats loop = engine.stats();
  metric_value(out, "ninfer_decode_steps_total", "counter",
               "Steps queued with decode rows (mixed steps included).", loop.decode_steps);
  metric_value(out, "ninfer_decode_rows_total", "counter",
               "Rows (one token of one sequence) of those steps.", loop.decode_rows);
  metric_value(out, "ninfer_chained_rows_total", "counter",
               "Decode rows fed by the previous step's pick on the device (the host had not read it).",
               loop.chained_rows);
  metric_value(out, "ninfer_prompt_chunks_total", "counter", "Prompt chunks run.", loop.prompt_chunks);
  metric_value(out, "ninfer_prefill_tokens_total", "counter",
               "Prompt tokens computed (those of the prompt chunks): a prompt the choices of a request share counts once.",
               loop.prompt_tokens);
  metric_value(out, "ninfer_forked_choices_total", "counter",
               "Choices (n > 1) that copied their request's prompt from its first choice instead of reading it.",
               loop.forks);
  metric_value(out, "ninfer_mixed_steps_total", "counter",
               "Steps that carried a prompt chunk and decode rows in one forward pass.", loop.mixed_steps);
  metric_value(out, "ninfer_logits_rows_total", "counter",
               "Logits rows brought to the host: tokens sampled there (penalties, top logprobs) and prompt logprobs.",
               loop.logits_rows);
  // Speculative decoding (docs/speculative.md): rounds, their rows (a sequence's part of a
  // round), the tokens the rows produced, and per draft position the rows that accepted it.
  metric_value(out, "ninfer_spec_rounds_total", "counter", "Speculative rounds queued.", loop.spec_rounds);
  metric_value(out, "ninfer_spec_rows_total", "counter",
               "Rows of speculative rounds read (one sequence's part of a round).", loop.spec.rows);
  metric_value(out, "ninfer_spec_tokens_total", "counter",
               "Tokens those rows produced: accepted drafts + the model's own next token each (their mean is the mean "
         "accepted length).",
               loop.spec.tokens);
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
  metric_value(out, "ninfer_generation_tokens_per_second", "gauge",
               "Tokens generated by requests finished in the last 60 s, per second.",
               static_cast<double>(recent_tokens) / kWindow.count());
  return out;
}

} // namespace ninfer::tools
