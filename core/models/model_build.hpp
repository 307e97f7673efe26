// The steps of a load once its options are settled, shared by CausalLM::load and the memory
// plan's dry run (memory_plan.cpp): the same code sizes a real load and its plan, so they agree.
#pragma once

#include <memory>

#include "decoder.hpp"
#include "ninfer/models/causal_lm.hpp"

namespace ninfer {
struct LoadedPlugin;
}

namespace ninfer::models {

// The KV cache element type a load uses: Auto is float16 on a CUDA device whose plugin reads
// and writes it, float32 elsewhere (ModelOptions::kv_cache). Throws ninfer::Error when the
// plugin has no kv_append or attention variant for an asked dtype.
KvCachePrecision resolve_kv_cache(const LoadedPlugin& plugin, const ninfer_device_info& device, KvCachePrecision want);
int32_t kv_dtype(KvCachePrecision p); // ninfer_dtype: F32, F16, BF16 or a compact KV_* format

// The largest steps of a load with `o` (max_context, kv_cache and mixed_chunk resolved).
StepLimits step_limits(const ModelOptions& o);

// Loads the weights and allocates every buffer of a decoder for `o` on `be` (which may be a dry
// run: BackendOptions::plan_only). The checkpoint must have passed require_all.
std::unique_ptr<Decoder> build_decoder(const Checkpoint& ck, Backend& be, const ModelOptions& o);

} // namespace ninfer::models
