// The prefix cache's host tier (ninfer/serving/prefix_cache.hpp): evicted blocks and state copies
// spill to host memory and come back on a match. Every copy is queued on the device's stream, in
// order with the steps, so a spill reads a block after the steps that wrote it, a restore lands
// before the step that reads it, and a host item is rewritten only after the restore that read it.
#include <fmt/format.h>

#include "ninfer/models/causal_lm.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/serving/prefix_cache.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::serving {

namespace {

// Room for `room` items of `unit` bytes in one allocation.
void open_area(CausalLM& lm, size_t unit, int64_t room, const char* what, auto& area) {
  area.unit = unit;
  area.room = room;
  if (room <= 0) return;
  area.memory = lm.allocate_host(unit * static_cast<size_t>(room), what);
  for (auto i = static_cast<int32_t>(room) - 1; i >= 0; --i) area.free.push_back(i);
}

} // namespace

// A recurrent model's state copies are few and large: they get half the memory, as many whole
// copies as fit, and the blocks the rest.
void PrefixCache::enable_host(size_t bytes) {
  if (host_blocks_.on() || !entries_.empty()) throw Error("internal: the prefix cache's host tier enabled twice or late");
  const size_t block = lm_.kv_block_bytes(), state = recurrent_ ? lm_.prefix_state_bytes() : 0;
  const size_t for_states = state ? bytes / 2 : 0;
  const auto states = static_cast<int64_t>(state ? for_states / state : 0);
  const auto blocks = static_cast<int64_t>((bytes - static_cast<size_t>(states) * state) / block);
  if (blocks < 1)
    throw Error(fmt::format("--host-cache-gib: {} of host memory holds no KV block of this model ({} each)",
                            format_bytes(bytes), format_bytes(block)));
  open_area(lm_, block, blocks, "the prefix cache's host blocks", host_blocks_);
  open_area(lm_, state, states, "the prefix cache's host state copies", host_states_);
}

PrefixCache::HostCounts PrefixCache::host_counts() const {
  return {static_cast<int64_t>(host_blocks_.lru.size()), static_cast<int64_t>(host_states_.lru.size()),
          host_blocks_.room,     host_states_.room,
          restored_blocks_,      restored_states_,
          host_blocks_.memory.bytes() + host_states_.memory.bytes()};
}

int32_t PrefixCache::take_host_block() {
  if (!host_blocks_.on()) return -1;
  if (host_blocks_.free.empty()) erase(host_blocks_.lru.begin()->second); // frees its item
  const int32_t h = host_blocks_.free.back();
  host_blocks_.free.pop_back();
  return h;
}

int32_t PrefixCache::take_host_state() {
  if (!host_states_.on()) return -1;
  if (host_states_.free.empty()) { // the oldest spilled copy is forgotten; its entry stays
    const uint64_t id = host_states_.lru.begin()->second;
    Entry& e = entries_.at(id);
    host_states_.lru.erase(host_states_.lru.begin());
    host_states_.free.push_back(std::exchange(e.host_state, -1));
  }
  const int32_t h = host_states_.free.back();
  host_states_.free.pop_back();
  return h;
}

bool PrefixCache::spill_block(uint64_t id) {
  const int32_t h = take_host_block();
  if (h < 0) return false;
  Entry& e = entries_.at(id);
  lm_.spill_kv_block(e.block, host_blocks_.memory, host_blocks_.at(h));
  lm_.kv_unhold_block(e.block);
  lru_.erase({e.used, id});
  e.block = -1;
  e.host_block = h;
  e.host_block_used = ++host_clock_;
  host_blocks_.lru.emplace(std::pair{e.host_block_used, id}, id);
  return true;
}

bool PrefixCache::restore_block(uint64_t id) {
  const int32_t b = lm_.kv_take_block_for_cache();
  if (b < 0) return false;
  Entry& e = entries_.at(id);
  lm_.unspill_kv_block(b, host_blocks_.memory, host_blocks_.at(e.host_block));
  host_blocks_.lru.erase({e.host_block_used, id});
  host_blocks_.free.push_back(std::exchange(e.host_block, -1));
  e.block = b;
  lru_.emplace(std::pair{e.used, id}, id);
  ++restored_blocks_;
  return true;
}

void PrefixCache::spill_state(uint64_t id, int32_t state) {
  const int32_t h = take_host_state();
  if (h < 0) return;
  Entry& e = entries_.at(id);
  lm_.spill_prefix_state(state, host_states_.memory, host_states_.at(h));
  e.host_state = h;
  e.host_state_used = ++host_clock_;
  host_states_.lru.emplace(std::pair{e.host_state_used, id}, id);
}

void PrefixCache::restore_state(uint64_t id) {
  const int32_t s = take_state(true); // a hit needs it: may spill any least recently used copy, never this one
  Entry& e = entries_.at(id);
  lm_.unspill_prefix_state(s, host_states_.memory, host_states_.at(e.host_state));
  host_states_.lru.erase({e.host_state_used, id});
  host_states_.free.push_back(std::exchange(e.host_state, -1));
  e.state = s;
  touch_state(id);
  ++restored_states_;
}

void PrefixCache::forget_host(Entry& e, uint64_t id) {
  if (e.host_block >= 0) {
    host_blocks_.lru.erase({e.host_block_used, id});
    host_blocks_.free.push_back(std::exchange(e.host_block, -1));
  }
  if (e.host_state >= 0) {
    host_states_.lru.erase({e.host_state_used, id});
    host_states_.free.push_back(std::exchange(e.host_state, -1));
  }
}

} // namespace ninfer::serving
