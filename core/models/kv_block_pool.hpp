// The blocks of the paged KV cache (ninfer/abi/ops/kv_append.h) and who holds them: one pool of
// block ids shared by every attention layer of a model (each layer has its own K/V storage of
// pool_blocks blocks; block b means the same positions of the same slot in every layer), a free
// list, and each slot's row of the block table on the host, mirrored into one backend buffer
// that every layer's cache descriptor points at. The buffer never moves, so a recorded CUDA
// graph reads whatever the table holds when it replays; sync() uploads the host rows, ordered
// before the steps queued after it. docs/memory.md explains the pool.
#pragma once

#include <cstdint>
#include <vector>

#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/runtime/backend.hpp"

namespace ninfer::models {

class KvBlockPool {
 public:
  // `slots` rows of ceil(max_context / block_tokens) entries over `pool_blocks` blocks of
  // `block_tokens` positions (a power of two). Allocates the table buffer (MemoryUse::Activations,
  // like the step inputs: per-step metadata of the kernels); every entry starts -1 (no block)
  // and every block free.
  KvBlockPool(Backend& be, int32_t slots, int64_t max_context, int32_t block_tokens, int64_t pool_blocks);

  int32_t slots() const { return slots_; }
  int32_t block_tokens() const { return block_tokens_; }
  int32_t blocks_per_slot() const { return blocks_per_slot_; }
  int32_t capacity() const { return blocks_per_slot_ * block_tokens_; } // positions one slot can hold
  int64_t total_blocks() const { return pool_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t held_blocks(int32_t slot) const { return held_[static_cast<size_t>(slot)]; }
  // Blocks that hold `positions` positions.
  int64_t blocks_for(int64_t positions) const { return (positions + block_tokens_ - 1) / block_tokens_; }

  // Gives `slot` blocks until it holds positions [0, positions); false (nothing changes) when the
  // free list lacks them or `positions` is past capacity().
  bool ensure(int32_t slot, int64_t positions);
  // Returns the blocks of `slot` past those that hold positions [0, positions) to the free list;
  // their entries become -1. release(slot) is trim(slot, 0).
  void trim(int32_t slot, int64_t positions);
  void release(int32_t slot) { trim(slot, 0); }
  // Uploads the host table when it changed since the last upload.
  void sync();

  // The layout fields of a cache over this pool (slots, capacity, table, block sizes).
  void describe(ninfer_kv_cache& c) const;
  // The host copy of slot's row (blocks_per_slot entries, -1 past what it holds).
  const int32_t* host_row(int32_t slot) const { return table_.data() + static_cast<size_t>(slot) * blocks_per_slot_; }

 private:
  Backend& be_;
  int32_t slots_, block_tokens_, blocks_per_slot_;
  int64_t pool_blocks_;
  std::vector<int32_t> table_; // [slots, blocks_per_slot], -1: no block
  std::vector<int32_t> held_;  // blocks per slot (its first held_[s] entries)
  std::vector<int32_t> free_;  // a stack: the lowest ids are handed out first
  DeviceBuffer device_table_;
  bool dirty_ = true;
};

} // namespace ninfer::models
