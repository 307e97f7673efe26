// The memory plan as the load prints it, and its refusal.
#include <fmt/format.h>

#include <limits>

#include "ninfer/models/memory_plan.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

std::string part_line(const char* name, size_t bytes, const std::string& detail) {
  return fmt::format("\n  {:<13}{:>11}{}{}", name, format_bytes(bytes), detail.empty() ? "" : "  ", detail);
}

std::string budget_text(const MemoryPlan& p) {
  std::string s;
  if (p.budget.limit) s = fmt::format("limit {} ({})", format_bytes(p.budget.limit), p.budget.limit_source);
  if (p.budget.free)
    s += fmt::format("{}free {} ({})", s.empty() ? "" : ", ", format_bytes(p.budget.free), p.budget.free_source);
  return s.empty() ? "no bound" : s;
}

} // namespace

std::string MemoryPlan::text() const {
  const ModelOptions& o = options;
  std::string s = fmt::format("memory plan for {} on {}: {} sequences x {} tokens, KV cache {}", model, device,
                              o.max_sequences, o.max_context, to_string(o.kv_cache));
  if (!note.empty()) s += " (" + note + ")";
  std::string formats;
  if (parts.weights_by_format.size() > 1)
    for (const auto& [format, bytes] : parts.weights_by_format)
      formats += fmt::format("{}{} {}", formats.empty() ? "" : ", ", format, format_bytes(bytes));
  s += part_line("weights", parts.of(MemoryUse::Weights), formats);
  s += part_line("kv-cache", parts.of(MemoryUse::KvCache),
                 fmt::format("{} per token x {} tokens", format_bytes(kv_bytes_per_token), kv_tokens));
  if (parts.of(MemoryUse::State))
    s += part_line("gdn-state", parts.of(MemoryUse::State),
                   fmt::format("{} per sequence x {}", format_bytes(state_bytes_per_sequence), o.max_sequences));
  if (const size_t b = parts.of(MemoryUse::PrefixStates); b && o.prefix_states > 0)
    s += part_line("prefix-states", b,
                   fmt::format("{} per copy x {} (the prefix cache's Gated DeltaNet states)",
                               format_bytes(b / static_cast<size_t>(o.prefix_states)), o.prefix_states));
  s += part_line("activations", parts.of(MemoryUse::Activations), "");
  s += part_line("workspace", parts.of(MemoryUse::Workspace), "");
  if (parts.allocator) s += part_line("allocator", parts.allocator, "estimate: buffers rounded to the allocator's granule");
  if (parts.cuda_graphs) s += part_line("cuda graphs", parts.cuda_graphs, "estimate: decode recordings");
  if (parts.cuda_runtime) s += part_line("cuda runtime", parts.cuda_runtime, "estimate: context, kernels, cuBLASLt");
  s += part_line("total", parts.total(), budget_text(*this));
  if (kv_tokens_fit >= 0)
    s += fmt::format("\n  KV tokens that fit: {} (room for {} sequences x {} tokens; the model's positions: {})",
                     kv_tokens_fit, o.max_sequences, kv_tokens_fit / o.max_sequences, max_positions);
  return s;
}

void MemoryPlan::require_fit() const {
  if (fits()) return;
  throw Error(fmt::format("{} does not fit on {}: {}\n{}\n(docs/memory.md: --memory-limit, --max-context, "
                          "--max-concurrency, --kv-dtype, quantized weights)",
                          model, device, problem, text()));
}

} // namespace ninfer
