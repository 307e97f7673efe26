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
  refs_.assign(static_cast<size_t>(pool_blocks), 0);
  cached_.assign(static_cast<size_t>(pool_blocks), 0);
  free_.reserve(static_cast<size_t>(pool_blocks));
  for (int64_t b = pool_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  device_table_ = be.allocate(sizeof(int32_t) * table_.size(), MemoryUse::Activations, "KV block table");
  sync();
}

int64_t KvBlockPool::shared_blocks(int32_t slot) const {
  const int32_t* r = host_row(slot);
  return std::count_if(r, r + held_[static_cast<size_t>(slot)], [&](int32_t b) { return holders(b) > 1; });
}

void KvBlockPool::hold(int32_t block) {
  if (block < 0 || block >= pool_blocks_ || refs_[static_cast<size_t>(block)] == 0 || cached_[static_cast<size_t>(block)])
    throw Error(fmt::format("internal: the prefix cache holds KV block {}, which is free or held by it already", block));
  cached_[static_cast<size_t>(block)] = 1;
  ++refs_[static_cast<size_t>(block)];
}

void KvBlockPool::unhold(int32_t block) {
  if (block < 0 || block >= pool_blocks_ || !cached_[static_cast<size_t>(block)])
    throw Error(fmt::format("internal: the prefix cache drops KV block {}, which it does not hold", block));
  cached_[static_cast<size_t>(block)] = 0;
  drop(block);
}

int32_t KvBlockPool::take_for_cache() {
  if (free_.empty()) return -1;
  const int32_t b = take_free();
  cached_[static_cast<size_t>(b)] = 1;
  return b;
}

int64_t KvBlockPool::evictable_blocks() const {
  int64_t n = 0;
  for (size_t b = 0; b < refs_.size(); ++b) n += cached_[b] && refs_[b] == 1;
  return n;
}

int32_t KvBlockPool::take_free() {
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KvBlockPool::drop(int32_t block) {
  if (--refs_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

bool KvBlockPool::ensure(int32_t slot, int64_t positions) {
  const int64_t want = blocks_for(positions), have = held_[static_cast<size_t>(slot)];
  if (want > blocks_per_slot_) return false;
  if (want <= have) return true;
  if (want - have > free_blocks()) return false;
  int32_t* r = row(slot);
  for (int64_t i = have; i < want; ++i) r[i] = take_free();
  held_[static_cast<size_t>(slot)] = static_cast<int32_t>(want);
  dirty_ = true;
  return true;
}

void KvBlockPool::trim(int32_t slot, int64_t positions) {
  int32_t& held = held_[static_cast<size_t>(slot)];
  const int32_t keep = static_cast<int32_t>(std::min<int64_t>(held, blocks_for(std::max<int64_t>(positions, 0))));
  int32_t* r = row(slot);
  for (int32_t i = held - 1; i >= keep; --i) {
    drop(r[i]);
    r[i] = -1;
  }
  if (keep < held) dirty_ = true;
  held = keep;
}

int64_t KvBlockPool::blocks_to_take(std::span<const Write> writes) const {
  // Holders a block has lost to the copies counted so far (few: a step copies a block or two).
  std::vector<std::pair<int32_t, int32_t>> lost;
  const auto lost_by = [&](int32_t b) -> int32_t& {
    for (auto& [block, n] : lost)
      if (block == b) return n;
    return lost.emplace_back(b, 0).second;
  };
  int64_t take = 0;
  for (const Write& w : writes) {
    const int64_t held = held_[static_cast<size_t>(w.slot)], want = blocks_for(w.to);
    take += std::max<int64_t>(0, want - held);
    const int32_t* r = host_row(w.slot);
    for (int64_t i = std::max<int64_t>(w.from, 0) / block_tokens_; i < std::min(held, want); ++i) {
      int32_t& n = lost_by(r[i]);
      if (holders(r[i]) - n > 1) {
        ++take;
        ++n;
      }
    }
  }
  return take;
}

std::vector<KvBlockPool::Copy> KvBlockPool::make_private(int32_t slot, int64_t from, int64_t to) {
  const Write w{slot, from, to};
  const int64_t held = held_[static_cast<size_t>(slot)];
  // Only the copies: the blocks past what the slot holds are ensure()'s.
  const int64_t copies = blocks_to_take(std::span(&w, 1)) - std::max<int64_t>(0, blocks_for(to) - held);
  if (copies > free_blocks())
    throw Error(fmt::format("internal: {} private KV block copies for slot {} and {} free blocks", copies, slot,
                            free_blocks()));
  std::vector<Copy> out;
  int32_t* r = row(slot);
  for (int64_t i = std::max<int64_t>(from, 0) / block_tokens_; i < std::min(held, blocks_for(to)); ++i) {
    if (holders(r[i]) < 2) continue;
    const int32_t mine = take_free();
    out.push_back({r[i], mine});
    drop(r[i]);
    r[i] = mine;
    dirty_ = true;
  }
  return out;
}

void KvBlockPool::share(int32_t dst, int32_t src, int64_t blocks) {
  if (blocks > held_[static_cast<size_t>(src)] || dst == src)
    throw Error(fmt::format("internal: slot {} shares {} KV blocks of slot {}, which holds {}", dst, blocks, src,
                            held_[static_cast<size_t>(src)]));
  int32_t* d = row(dst);
  const int32_t* s = host_row(src);
  int32_t& held = held_[static_cast<size_t>(dst)];
  for (int64_t i = 0; i < blocks; ++i) {
    if (d[i] == s[i]) continue;
    ++refs_[static_cast<size_t>(s[i])];
    if (i < held) drop(d[i]);
    d[i] = s[i];
  }
  held = std::max(held, static_cast<int32_t>(blocks));
  dirty_ = true;
}

void KvBlockPool::adopt(int32_t slot, std::span<const int32_t> blocks) {
  if (static_cast<int64_t>(blocks.size()) > blocks_per_slot_)
    throw Error(fmt::format("internal: slot {} adopts {} KV blocks; a row has {}", slot, blocks.size(), blocks_per_slot_));
  for (int32_t b : blocks)
    if (b < 0 || b >= pool_blocks_ || refs_[static_cast<size_t>(b)] == 0)
      throw Error(fmt::format("internal: slot {} adopts KV block {}, which is free", slot, b));
  // The new holds first: a block the slot holds already never passes through the free list.
  for (int32_t b : blocks) ++refs_[static_cast<size_t>(b)];
  release(slot);
  int32_t* r = row(slot);
  std::copy(blocks.begin(), blocks.end(), r);
  held_[static_cast<size_t>(slot)] = static_cast<int32_t>(blocks.size());
  dirty_ = true;
}

KvBlockPool::Outlook KvBlockPool::outlook(int32_t slot, int64_t keep, int64_t from, int64_t to,
                                          std::span<const int32_t> released, std::span<const int32_t> adopt) const {
  std::vector<int32_t> refs = refs_;
  for (int32_t s : released) {
    if (s == slot) continue;
    const int32_t* r = host_row(s);
    for (int32_t i = 0; i < held_[static_cast<size_t>(s)]; ++i) --refs[static_cast<size_t>(r[i])];
  }
  const int64_t held = held_[static_cast<size_t>(slot)];
  const int64_t kept = adopt.empty() ? std::min(held, blocks_for(std::max<int64_t>(keep, 0)))
                                     : static_cast<int64_t>(adopt.size());
  for (int32_t b : adopt) ++refs[static_cast<size_t>(b)];
  const int32_t* r = host_row(slot);
  for (int64_t i = adopt.empty() ? kept : 0; i < held; ++i) --refs[static_cast<size_t>(r[i])];
  if (!adopt.empty()) r = adopt.data();
  Outlook o;
  o.free = std::count(refs.begin(), refs.end(), 0);
  for (size_t b = 0; b < refs.size(); ++b) o.evictable += cached_[b] && refs[b] == 1;
  const int64_t want = blocks_for(to);
  o.take = std::max<int64_t>(0, want - kept);
  for (int64_t i = std::max<int64_t>(from, 0) / block_tokens_; i < std::min(kept, want); ++i)
    o.take += refs[static_cast<size_t>(r[i])] > 1;
  return o;
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
