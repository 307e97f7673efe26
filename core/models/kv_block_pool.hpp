// The blocks of the paged KV cache (ninfer/abi/ops/kv_append.h) and who holds them: one pool of
// block ids shared by every attention layer of a model (each layer has its own K/V storage of
// pool_blocks blocks; block b means the same positions in every layer), a free list, and each
// slot's row of the block table on the host, mirrored into one backend buffer that every layer's
// cache descriptor points at. The buffer never moves, so a recorded CUDA graph reads whatever the
// table holds when it replays; sync() uploads the host rows, ordered before the steps queued
// after it. docs/memory.md explains the pool.
//
// A block may sit in several slots' rows (share: sequences with a common prefix, CausalLM::fork);
// it counts its holders and returns to the free list when the last one drops it. A shared block
// is only read: a slot about to write positions inside a block another row also holds first gets
// a private copy (make_private names the copies; the caller copies the rows of every layer
// before anything writes them).
//
// A block may also be held by the prefix cache (ninfer/serving/prefix_cache.hpp): one more holder
// that is no row, so the block's rows outlive the slot that wrote them. A block whose only holder
// is the cache is evictable: the cache gives it back when the free list falls short.
#pragma once

#include <cstdint>
#include <span>
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
  // Blocks no row holds.
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Entries of the slot's row (its first held_blocks(slot) entries), shared ones included.
  int64_t held_blocks(int32_t slot) const { return held_[static_cast<size_t>(slot)]; }
  // Of them, the blocks another row also holds.
  int64_t shared_blocks(int32_t slot) const;
  // Rows holding `block`, and the prefix cache if it holds it (0: it is free).
  int32_t holders(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  // The prefix cache's hold: hold() adds it to a block some row holds, unhold() drops it (the
  // block is free once no row holds it either). Throws ninfer::Error for a free block, a block
  // held twice or one not held.
  void hold(int32_t block);
  void unhold(int32_t block);
  // A free block that only the cache holds (a block restored from host memory), -1 when none is free.
  int32_t take_for_cache();
  bool held_by_cache(int32_t block) const { return cached_[static_cast<size_t>(block)] != 0; }
  // Blocks whose only holder is the cache.
  int64_t evictable_blocks() const;
  // Blocks that hold `positions` positions.
  int64_t blocks_for(int64_t positions) const { return (positions + block_tokens_ - 1) / block_tokens_; }

  // Gives `slot` blocks until it holds positions [0, positions); false (nothing changes) when the
  // free list lacks them or `positions` is past capacity().
  bool ensure(int32_t slot, int64_t positions);
  // Drops the blocks of `slot` past those that hold positions [0, positions): their entries become
  // -1, and a block no other row holds returns to the free list. release(slot) is trim(slot, 0).
  void trim(int32_t slot, int64_t positions);
  void release(int32_t slot) { trim(slot, 0); }

  // Positions [from, to) a slot is about to write.
  struct Write {
    int32_t slot = 0;
    int64_t from = 0, to = 0;
  };
  // Blocks the writes take from the free list, in order: the blocks their positions reach past
  // what their slots hold, and a private copy of each block a slot holds where it writes while
  // another row holds it too (a block copied away by one write is no longer shared for the next).
  int64_t blocks_to_take(std::span<const Write> writes) const;
  // A block copy to make in every layer: the rows of block `from` into block `to`.
  struct Copy {
    int32_t from = -1, to = -1;
  };
  // Gives `slot` a private copy of each block it holds that holds positions [from, to) and that
  // another row also holds: a free block takes that entry, the old block loses a holder. Returns
  // the copies, oldest entry first; throws ninfer::Error (nothing changed) when the free blocks
  // do not suffice (blocks_to_take counts them).
  std::vector<Copy> make_private(int32_t slot, int64_t from, int64_t to);
  // `dst`'s first `blocks` entries become `src`'s (each gains a holder); what dst held there is
  // dropped as trim drops it, and its entries past them stay. `src` must hold `blocks` blocks.
  void share(int32_t dst, int32_t src, int64_t blocks);
  // `slot` drops every block it holds, then holds `blocks` (each held already, by the cache or a
  // row) as its first entries: a cached prefix. Throws ninfer::Error for a free block or more
  // blocks than a row has.
  void adopt(int32_t slot, std::span<const int32_t> blocks);

  // What taking blocks for `slot` to write positions [from, to) would need once `slot` kept only
  // the blocks of its first `keep` positions and every slot in `released` (the slot itself
  // excepted) dropped all of its: the blocks it would take (as blocks_to_take counts them) and
  // the blocks then free, and those then held by the cache alone (evictable). A block another row
  // keeps stays held. `adopt` not empty: instead of keeping any of its blocks, `slot` holds those
  // (adopt(), `keep` is ignored).
  struct Outlook {
    int64_t take = 0, free = 0, evictable = 0;
  };
  Outlook outlook(int32_t slot, int64_t keep, int64_t from, int64_t to, std::span<const int32_t> released,
                  std::span<const int32_t> adopt = {}) const;

  // Uploads the host table when it changed since the last upload.
  void sync();

  // The layout fields of a cache over this pool (slots, capacity, table, block sizes).
  void describe(ninfer_kv_cache& c) const;
  // The host copy of slot's row (blocks_per_slot entries, -1 past what it holds).
  const int32_t* host_row(int32_t slot) const { return table_.data() + static_cast<size_t>(slot) * blocks_per_slot_; }

 private:
  int32_t* row(int32_t slot) { return table_.data() + static_cast<size_t>(slot) * blocks_per_slot_; }
  int32_t take_free();
  void drop(int32_t block);

  Backend& be_;
  int32_t slots_, block_tokens_, blocks_per_slot_;
  int64_t pool_blocks_;
  std::vector<int32_t> table_; // [slots, blocks_per_slot], -1: no block
  std::vector<int32_t> held_;  // blocks per slot (its first held_[s] entries)
  std::vector<int32_t> refs_;  // rows holding each block, plus one when the cache holds it
  std::vector<uint8_t> cached_; // 1: the prefix cache holds the block
  std::vector<int32_t> free_;  // a stack: the lowest ids are handed out first
  DeviceBuffer device_table_;
  bool dirty_ = true;
};

} // namespace ninfer::models
