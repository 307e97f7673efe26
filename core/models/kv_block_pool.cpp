#include "kv_block_pool.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ninfer/support/error.hpp"

namespace ninfer::models {

KvBlockPool::KvBlockPool(Backend& be, int32_t slots, int64_t max_context, int32_t block_tokens, int64_t pool_blocks)
    : be_(be), slots_(slots), block_tokens_(block_tokens), pool_blocks_(pool_blocks) {
  if (block_tokens <= 0 || (block_tokens & (block_tokens - 1)))
    throw Error(fmt::format("KV block size {} is not a power of two", block_tokens));
  const int64_t per_slot = (max_context + block_tokens - 1) / block_tokens;
  if (slots <= 0 || per_slot <= 0 || per_slot * block_tokens > INT32_MAX || pool_blocks <= 0 || pool_blocks > INT32_MAX)
    throw Error(fmt::format("internal: a KV block pool of {} blocks for {} slots x {} positions", pool_blocks, slots,
                            max_context));
  blocks_per_slot_ = static_cast<int32_t>(per_slot);
  table_.assign(static_cast<size_t>(slots) * blocks_per_slot_, -1);
  held_.assign(static_cast<size_t>(slots), 0);
  free_.reserve(static_cast<size_t>(pool_blocks));
  for (int64_t b = pool_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  device_table_ = be.allocate(sizeof(int32_t) * table_.size(), MemoryUse::Activations, "KV block table");
  sync();
}

bool KvBlockPool::ensure(int32_t slot, int64_t positions) {
  const int64_t want = blocks_for(positions), have = held_[static_cast<size_t>(slot)];
  if (want > blocks_per_slot_) return false;
  if (want <= have) return true;
  if (want - have > free_blocks()) return false;
  int32_t* row = table_.data() + static_cast<size_t>(slot) * blocks_per_slot_;
  for (int64_t i = have; i < want; ++i) {
    row[i] = free_.back();
    free_.pop_back();
  }
  held_[static_cast<size_t>(slot)] = static_cast<int32_t>(want);
  dirty_ = true;
  return true;
}

void KvBlockPool::trim(int32_t slot, int64_t positions) {
  int32_t& held = held_[static_cast<size_t>(slot)];
  const int32_t keep = static_cast<int32_t>(std::min<int64_t>(held, blocks_for(std::max<int64_t>(positions, 0))));
  int32_t* row = table_.data() + static_cast<size_t>(slot) * blocks_per_slot_;
  for (int32_t i = held - 1; i >= keep; --i) {
    free_.push_back(row[i]);
    row[i] = -1;
  }
  if (keep < held) dirty_ = true;
  held = keep;
}

void KvBlockPool::sync() {
  if (!dirty_) return;
  be_.upload(device_table_, 0, table_.data(), sizeof(int32_t) * table_.size());
  dirty_ = false;
}

void KvBlockPool::describe(ninfer_kv_cache& c) const {
  c.slots = slots_;
  c.capacity = capacity();
  c.block_table = device_table_.as<int32_t>();
  c.block_tokens = block_tokens_;
  c.blocks_per_slot = blocks_per_slot_;
  c.pool_blocks = static_cast<int32_t>(pool_blocks_);
}

} // namespace ninfer::models
