#include "model_build.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kv_block_pool.hpp"
#include "ninfer/models/memory_plan.hpp"
#include "model_families.hpp"
#include "mtp_head.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::models {
namespace {

// Whether `plugin` has kv_append and attention variants for a cache of `dtype` (their
// dtype_mask: the planning shape's dtype is the cache dtype).
bool plugin_takes_kv_dtype(const LoadedPlugin& plugin, int32_t dtype) {
  for (const char* op : {NINFER_OP_KV_APPEND, NINFER_OP_ATTENTION}) {
    bool any = false;
    for (const ninfer_variant* v : plugin.variants_for(op)) any = any || (v->dtype_mask & (1u << dtype));
    if (!any) return false;
  }
  return true;
}

} // namespace

int32_t kv_dtype(KvCachePrecision p) { return kv_cache_dtype(p); }

KvCachePrecision resolve_kv_cache(const LoadedPlugin& plugin, const ninfer_device_info& device, KvCachePrecision want) {
  if (want == KvCachePrecision::Auto)
    return device.kind == NINFER_DEVICE_CUDA && plugin_takes_kv_dtype(plugin, NINFER_DTYPE_F16) ? KvCachePrecision::F16
                                                                                               : KvCachePrecision::F32;
  if (!plugin_takes_kv_dtype(plugin, kv_dtype(want)))
    throw Error(fmt::format("plugin {} has no kv_append or attention variant for a {} KV cache; use kv_dtype auto or "
                            "float32",
                            plugin.name(), to_string(want)));
  return want;
}

StepLimits step_limits(const ModelOptions& o) {
  StepLimits limits;
  // The largest step: a prompt chunk alone, a decode step, or a mixed step (a chunk and a row
  // for every other slot).
  limits.max_mixed_chunk = o.max_sequences > 1 ? o.mixed_chunk : 0;
  // A speculative round verifies every sequence's next input and its drafts in one pass.
  limits.draft_tokens = o.speculation.on() ? o.speculation.draft_tokens : 0;
  limits.draft_vocab = o.speculation.on() ? o.speculation.draft_vocab : 0;
  limits.int4_draft_head = o.speculation.on() && o.speculation.draft_head == DraftHead::Int4;
  limits.max_tokens = std::max<int64_t>({o.prefill_chunk, o.max_sequences,
                                         limits.max_mixed_chunk ? o.mixed_chunk + o.max_sequences - 1 : 0,
                                         int64_t{o.max_sequences} * (limits.draft_tokens + 1)});
  limits.max_sequences = o.max_sequences;
  limits.max_context = o.max_context;
  limits.kv_dtype = kv_dtype(o.kv_cache);
  limits.state_snapshots = o.state_snapshots;
  limits.prefix_states = o.prefix_states;
  return limits;
}

std::unique_ptr<Decoder> build_decoder(const Checkpoint& ck, Backend& be, const ModelOptions& o) {
  const ModelConfig& cfg = ck.config();
  const bool mtp = o.speculation.method == SpecMethod::Mtp;
  if (mtp) require_mtp(ck);
  StepLimits limits = step_limits(o);
  // The blocks are handed to the slots as their sequences grow (CausalLM takes them before each
  // step); kv_pool_blocks says how many there are.
  auto pool = std::make_unique<KvBlockPool>(be, o.max_sequences, o.max_context, kv_block_tokens(o), kv_pool_blocks(o));
  limits.kv_pool = pool.get();
  WeightLoader w(ck, be, o.weights, mtp ? static_cast<int64_t>(mtp_tensors(cfg).size()) : 0);
  DecoderParts parts = decoder_builder(family_of(cfg))(w, be, cfg, limits);
  std::unique_ptr<MtpHead> head = mtp ? std::make_unique<MtpHead>(w, be, cfg, limits) : nullptr;
  return std::make_unique<Decoder>(be, std::move(parts), limits, std::move(pool), std::move(head));
}

} // namespace ninfer::models
