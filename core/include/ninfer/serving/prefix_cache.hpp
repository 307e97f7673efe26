// The serving engine's prefix cache across slots (docs/serving.md, "The prefix cache"): the full
// KV blocks of finished requests, found again by their tokens, so that a prompt beginning with a
// prefix some earlier request computed (a shared system prompt, an earlier turn of a chat that
// ran in another slot) reads those blocks instead of computing them.
//
// An entry is one full block of kv_block_tokens() positions: its tokens, the entry before it in
// its sequence (the chain: a block's rows depend on every token before it) and the pool block
// that holds its rows. Entries are found by a chain hash (the hash of the previous block's hash
// and this block's tokens), and a hit compares the tokens and the previous entry too, so two
// chains whose hashes collide never share rows. The cache holds one reference on each block
// (CausalLM::kv_hold_block), so the rows outlive the slot that wrote them; a slot that reads them
// shares the block, and copy-on-write keeps a slot from ever writing into it. A block that only
// the cache holds is evictable: the engine gives back the least recently used ones when an
// admission lacks free blocks (the engine's admission counts them as obtainable).
//
// A model with Gated DeltaNet layers keeps one recurrent state for all of a sequence's tokens,
// which the blocks do not hold: there an entry may also hold a copy of that state after its last
// token (CausalLM::save_prefix_state, one of CausalLM::prefix_states()), and a match ends at the
// deepest entry of its chain that holds one, whose state the adopting slot resumes from. The
// copies are few and large (one sequence's state each): the least recently used entry gives its
// copy up when a new one is needed, and keeps its block.
//
// The host tier (enable_host, ninfer-serve --host-cache-gib): an evicted block, or a state copy
// given up, is copied into page-locked host memory instead of being dropped (the copy is queued
// on the device's stream: the host does not wait), its entry stays in the chain, and a match
// that reaches it copies it back into a free block (or state copy) before the slot adopts it.
// The host memory holds whole blocks, and on a recurrent model its other half whole state
// copies; the least recently spilled goes when it is full.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "ninfer/runtime/device_buffer.hpp"

namespace ninfer {
class CausalLM;
}

namespace ninfer::serving {

class PrefixCache {
 public:
  // The chain hash of a block: of the previous block's hash (0 for the first block) and its tokens.
  using Hash = std::function<uint64_t(uint64_t previous, std::span<const int32_t> tokens)>;
  static uint64_t default_hash(uint64_t previous, std::span<const int32_t> tokens);

  // `lm` must outlive the cache, and either can_truncate() or have prefix_states(). `hash` empty:
  // default_hash (tests pass a colliding one).
  explicit PrefixCache(CausalLM& lm, Hash hash = {});
  ~PrefixCache(); // gives every hold back
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // `tokens` are the first tokens the slot holds (at most its position): the cache takes a hold
  // on each full block of them it does not have yet, and marks them all used now.
  void offer(int32_t slot, std::span<const int32_t> tokens);

  // A recurrent model's offer made while the slot computes further (its next tokens go to later
  // blocks): `tokens`, a whole number of blocks, are the slot's first tokens and its state is the
  // state after them. Returns the state copy the caller must fill at once
  // (CausalLM::save_prefix_state, before the slot's next step is queued), or -1 when the last
  // block's entry holds a copy already or the model keeps none. `anchor`: the point is a prompt's
  // end or a request's state point (what a next turn or a shared system prompt resumes from),
  // not only an interval one: when every copy is held, a new copy gives up the least recently
  // used interval copy first, and an interval point never takes an anchor's copy.
  int32_t offer_state(int32_t slot, std::span<const int32_t> tokens, bool anchor = true);
  // The copy offer_state returned was never filled: its entry gives it up.
  void abandon_state(int32_t state);

  // The longest chain of cached blocks that begins `prompt`, at most `most_tokens` tokens (for a
  // recurrent model: ending at an entry with a state copy), marked used now: its pool blocks in
  // position order, each holding block_tokens() of the prompt, and the state copy after the last
  // (-1 for a model without recurrent layers).
  // Blocks the host tier holds are brought back into free blocks first; `missing` counts those of
  // the chain that found none (the chain stops before the first): with that many more free
  // blocks, matching again reaches further.
  struct Match {
    std::vector<int32_t> blocks;
    int32_t state = -1;
    int64_t missing = 0;
  };
  Match match(std::span<const int32_t> prompt, int64_t most_tokens);

  // Gives back the least recently used block only the cache holds; false when there is none.
  bool evict_one();

  // The host tier over `bytes` of host memory (CausalLM::allocate_host); throws ninfer::Error
  // when the memory cannot be had or holds not even one block. Once, before any offer.
  void enable_host(size_t bytes);

  int32_t block_tokens() const { return block_tokens_; }
  int64_t blocks() const { return static_cast<int64_t>(lru_.size()); } // device blocks held
  int64_t evictions() const { return evictions_; }
  int64_t states() const { return static_cast<int64_t>(state_lru_.size()); } // state copies held
  int64_t state_evictions() const { return state_evictions_; }
  // The host tier: blocks and state copies it holds, room for them, and those a match restored.
  struct HostCounts {
    int64_t blocks = 0, states = 0, block_room = 0, state_room = 0, restored_blocks = 0, restored_states = 0;
    size_t bytes = 0; // host memory taken
  };
  HostCounts host_counts() const;

 private:
  struct Entry {
    uint64_t previous = 0; // the previous entry's id, 0 for a first block
    uint64_t hash = 0;
    std::vector<int32_t> tokens;
    int32_t block = -1;
    uint64_t used = 0;
    int32_t state = -1; // a recurrent model's state copy after this block, or -1
    uint64_t state_used = 0;
    bool state_anchor = false; // taken at an anchor point (offer_state)
    int32_t host_block = -1, host_state = -1; // where the host tier holds them (block, state -1)
    uint64_t host_block_used = 0, host_state_used = 0;
  };
  // Host memory for items of `unit` bytes: the free ones, and the held ones by age.
  struct HostArea {
    HostBuffer memory;
    size_t unit = 0;
    int64_t room = 0;
    std::vector<int32_t> free;
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> lru; // (spilled, entry id) -> id
    bool on() const { return room > 0; }
    size_t at(int32_t item) const { return static_cast<size_t>(item) * unit; }
  };
  // The host tier's halves of an entry's life (prefix_cache_host.cpp): spilled where there is
  // room (true), brought back into a free block / the given state copy, forgotten on erase.
  bool spill_block(uint64_t id);
  bool restore_block(uint64_t id);
  void spill_state(uint64_t id, int32_t state);
  void restore_state(uint64_t id);
  void forget_host(Entry& e, uint64_t id);
  // A free item of the area, making room by dropping the oldest; -1 when the area is off.
  int32_t take_host_block();
  int32_t take_host_state();
  void touch_state(uint64_t id);
  // Offers the blocks of `tokens`; the id of the entry of the last whole block, 0 for none.
  uint64_t offer_chain(int32_t slot, std::span<const int32_t> tokens);
  // A free state copy, or the least recently used interval copy's, or (`anchor`) the least
  // recently used copy's; -1 when there is none to take.
  int32_t take_state(bool anchor);
  // The entry after `previous` holding `tokens`, 0 for none.
  uint64_t find(uint64_t previous, uint64_t hash, std::span<const int32_t> tokens) const;
  void touch(uint64_t id, uint64_t used);
  void erase(uint64_t id);

  CausalLM& lm_;
  Hash hash_;
  int32_t block_tokens_;
  uint64_t next_id_ = 1, clock_ = 0, state_clock_ = 0;
  int64_t evictions_ = 0, state_evictions_ = 0;
  bool recurrent_;
  std::vector<int32_t> free_states_;
  HostArea host_blocks_, host_states_;
  uint64_t host_clock_ = 0;
  int64_t restored_blocks_ = 0, restored_states_ = 0;
  std::unordered_map<uint64_t, Entry> entries_;           // by id
  std::unordered_multimap<uint64_t, uint64_t> by_hash_;   // chain hash -> ids
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> lru_; // (used, id) -> id, oldest first
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> state_lru_; // (state_used, id) of entries with a state
};

} // namespace ninfer::serving
