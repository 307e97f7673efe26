// The memory plan of a load, made before anything is allocated (docs/memory.md): the bytes of
// each part a load will allocate, the estimates of what the device takes beside them, and how
// many KV tokens the budget leaves room for, divided into concurrency x context.
//
// The exact parts come from a dry run of the load itself: the decoder is built on a backend that
// counts its allocations without making them (BackendOptions::plan_only), reading no weight data,
// and its largest steps are planned for workspace as a real load plans them. So the plan and a
// load's MemoryReport agree byte for byte on weights, KV cache, state, activations and workspace
// (models_cpu_tests' MemoryPlan.* check it on every fixture and random preset).
//
// KV tokens are the unit of the KV cache: a pool of blocks of kKvBlockTokens tokens per attention
// layer (docs/memory.md, "The KV block pool"): max_concurrency x max_context tokens rounded up to
// whole blocks per sequence, or fewer when kv_capacity asks for fewer (kv_pool_blocks).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "ninfer/abi/device_info.h"
#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/runtime/device_buffer.hpp"

namespace ninfer {

class Backend;
struct LoadedPlugin;
struct ScheduleTable;

// Estimates of what a CUDA device takes beside the buffers a load allocates (docs/memory.md,
// "Estimates"). None of them applies to the CPU plugin.
// The CUDA context, the kernels of the plugin's modules and the cuBLASLt handle, which a
// process holds before it allocates anything: a card's whole memory (a described card,
// --memory-limit) must hold them too; a live device's free memory is measured after them.
inline constexpr size_t kCudaRuntimeBytes = size_t{512} << 20;
// Positions per block of the paged KV cache (ninfer/abi/ops/kv_append.h): a power of two >=
// NINFER_ATTENTION_TILE_BLOCK_TOKENS (32), so every attention variant of the CUDA plugins takes
// it. 64 keeps the table small (a 262,144-token sequence has 4,096 entries) and leaves at most 63
// positions of a sequence's last block unused; the choice against 32, 128 or 256 awaits a
// measurement of the attention kernels on a GPU.
inline constexpr int32_t kKvBlockTokens = 64;
// Blocks of the KV pool a load makes with options `o` (max_context resolved): every slot's whole
// max_context in blocks, or, when o.kv_capacity is set, kv_capacity rounded down to whole blocks,
// but never fewer than one sequence's max_context needs (the plan refuses a kv_capacity below
// max_context); more than every slot's whole context leaves room for the prefix cache. Sequences then share the pool and the serving engine admits a
// request only when the blocks it may need are free (docs/memory.md, "The KV block pool").
int64_t kv_pool_blocks(const ModelOptions& o);
// Positions per KV block of a load with options `o`: o.kv_block_tokens, or kKvBlockTokens.
inline int32_t kv_block_tokens(const ModelOptions& o) { return o.kv_block_tokens ? o.kv_block_tokens : kKvBlockTokens; }
// One decode recording (a CUDA graph: its kernel nodes and their parameters on the device),
// for a 64-layer model's few hundred launches.
inline constexpr size_t kCudaGraphBytes = size_t{1} << 20;
// The share of the host's available memory (MemAvailable) the CPU plugin plans with when no
// limit is given: the rest stays for the page cache of the mapped checkpoint, the tokenizer
// and the other processes of the machine.
inline constexpr double kHostMemoryShare = 0.8;
// The shortest context an automatic max_context may come to: one decode bucket
// (Decoder::decode_bucket). Fewer tokens per sequence is reported as not fitting.
inline constexpr int64_t kMinAutoContext = 256;
// An automatic max_context below the model's positions is rounded down to a multiple of this.
inline constexpr int64_t kAutoContextStep = 256;

// What the plan may use.
struct MemoryBudget {
  // All the memory of the device the model may take, the CUDA runtime's own included: a
  // described card's memory, --memory / --memory-limit / runtime.memory_limit. 0: no limit.
  size_t limit = 0;
  std::string limit_source; // "--memory-limit 32 GiB", "RTX 4080 SUPER: 16 GiB"
  // What the device has free now, the CUDA runtime already in it (cudaMemGetInfo; on the CPU,
  // kHostMemoryShare of MemAvailable). 0: unknown.
  size_t free = 0;
  std::string free_source;
};

// The budget of a load on `be`: its memory limit, and the device's free memory (the CPU
// plugin's: kHostMemoryShare of MemAvailable).
MemoryBudget load_budget(const Backend& be);

// Where the plan is made: the plugin whose planner sizes the workspace, on `device`; the
// memory is that of `memory_device` (usually the same; a described card whose plugin is not
// here is planned with a stand-in plugin, and `note` says so).
struct PlanTarget {
  const LoadedPlugin* plugin = nullptr;
  ninfer_device_info device{};
  const ScheduleTable* table = nullptr; // null: the plugin's default table for `device`
  ninfer_device_info memory_device{};
  std::string note;
};
PlanTarget plan_target(const Backend& be); // a load's: its plugin, device and table

// Bytes per part. The first five are exact (MemoryReport of the load, by MemoryUse); the others
// are estimates.
struct MemoryParts {
  std::array<size_t, static_cast<size_t>(MemoryUse::Count)> exact{};
  std::map<std::string, size_t> weights_by_format;
  size_t allocator = 0;    // allocator_overhead: rounding of each buffer to the allocator's granule
  size_t cuda_graphs = 0;  // kCudaGraphBytes per decode recording a run may make
  size_t cuda_runtime = 0; // kCudaRuntimeBytes, where the budget's limit counts it
  size_t of(MemoryUse u) const { return exact[static_cast<size_t>(u)]; }
  size_t allocated() const; // the exact parts: what the load's MemoryReport::total will be
  size_t total() const;     // allocated() and the estimates
};

struct MemoryPlan {
  std::string model;  // for messages
  std::string device; // the memory's device
  bool cuda = false;  // the memory is a CUDA device's
  std::string note;   // PlanTarget::note
  ModelOptions options; // resolved: max_context, max_sequences, kv_cache as the load will use them
  int64_t kv_capacity = 0; // asked (ModelOptions::kv_capacity); 0: auto
  int64_t max_positions = 0; // the model's max_position_embeddings
  MemoryParts parts;
  size_t kv_bytes_per_token = 0;       // every attention layer's K and V of one token
  size_t state_bytes_per_sequence = 0; // Gated DeltaNet conv + recurrent state of one slot
  int64_t kv_tokens = 0;     // the KV pool's tokens: kv_pool_blocks(options) x kv_block_tokens(options)
  int64_t kv_tokens_fit = -1; // what the budget leaves room for after every other part; -1: no bound
  MemoryBudget budget;
  // Bytes the tighter bound of the budget leaves for the KV cache (negative: the other parts
  // alone exceed it; INT64_MAX: no bound), and that bound ("the memory limit (...)").
  int64_t room = 0;
  std::string bound;
  std::string problem; // empty when the plan fits; else why not, with the numbers

  bool fits() const { return problem.empty(); }
  // The block the load prints: bytes per part, KV tokens that fit, concurrency x context.
  std::string text() const;
  // Throws ninfer::Error with the problem and the parts when the plan does not fit.
  void require_fit() const;
};

// Plans a load of `ck` with `asked` (max_context 0: what the model supports and the memory
// allows at max_sequences; kv_capacity 0: what the budget leaves). Throws ninfer::Error for a
// checkpoint that cannot be loaded at all (a missing tensor, a KV dtype the plugin lacks); a
// plan that does not fit is returned with its problem set.
MemoryPlan plan_memory(const Checkpoint& ck, const PlanTarget& target, const ModelOptions& asked,
                       const MemoryBudget& budget);

} // namespace ninfer
