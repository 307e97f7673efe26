#include "ninfer/serving/prefix_cache.hpp"

#include <algorithm>
#include <utility>

#include "ninfer/models/causal_lm.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::serving {

uint64_t PrefixCache::default_hash(uint64_t previous, std::span<const int32_t> tokens) {
  // splitmix64's finaliser over the previous hash and each token in turn.
  const auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(previous + 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull));
  return h;
}

PrefixCache::PrefixCache(CausalLM& lm, Hash hash)
    : lm_(lm), hash_(hash ? std::move(hash) : Hash(default_hash)), block_tokens_(lm.kv_block_tokens()),
      recurrent_(!lm.can_truncate()) {
  if (recurrent_ && lm.prefix_states() == 0)
    throw Error("internal: a prefix cache of KV blocks on a model whose slots hold state besides their KV rows, "
                "without state copies");
  for (int32_t s = lm.prefix_states() - 1; s >= 0; --s) free_states_.push_back(s);
}

PrefixCache::~PrefixCache() {
  for (const auto& [id, e] : entries_)
    if (e.block >= 0) lm_.kv_unhold_block(e.block);
}

uint64_t PrefixCache::find(uint64_t previous, uint64_t hash, std::span<const int32_t> tokens) const {
  const auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const Entry& e = entries_.at(it->second);
    if (e.previous == previous && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end()))
      return it->second;
  }
  return 0;
}

void PrefixCache::touch(uint64_t id, uint64_t used) {
  Entry& e = entries_.at(id);
  lru_.erase({e.used, id});
  e.used = used;
  lru_.emplace(std::pair{used, id}, id);
}

void PrefixCache::erase(uint64_t id) {
  Entry& e = entries_.at(id);
  if (e.block >= 0) {
    lm_.kv_unhold_block(e.block);
    lru_.erase({e.used, id});
  }
  forget_host(e, id);
  if (e.state >= 0) {
    state_lru_.erase({e.state_used, id});
    free_states_.push_back(e.state);
  }
  const auto [first, last] = by_hash_.equal_range(e.hash);
  for (auto it = first; it != last; ++it)
    if (it->second == id) {
      by_hash_.erase(it);
      break;
    }
  entries_.erase(id);
}

// A chain's deeper blocks are marked used before its shallower ones, so eviction takes a chain
// from its end and never strands the blocks after an evicted one while they are older.
void PrefixCache::offer(int32_t slot, std::span<const int32_t> tokens) { offer_chain(slot, tokens); }

uint64_t PrefixCache::offer_chain(int32_t slot, std::span<const int32_t> tokens) {
  const std::span<const int32_t> row = lm_.kv_block_row(slot);
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_tokens_), row.size());
  std::vector<uint64_t> chain;
  uint64_t previous = 0, h = 0;
  for (size_t i = 0; i < full; ++i) {
    const std::span<const int32_t> t = tokens.subspan(i * static_cast<size_t>(block_tokens_), block_tokens_);
    h = hash_(h, t);
    uint64_t id = find(previous, h, t);
    if (!id) {
      id = next_id_++;
      lm_.kv_hold_block(row[i]);
      entries_.emplace(id, Entry{previous, h, {t.begin(), t.end()}, row[i], 0});
      by_hash_.emplace(h, id);
      lru_.emplace(std::pair{uint64_t{0}, id}, id);
    } else if (Entry& e = entries_.at(id); e.block < 0) { // on the host: the slot's rows are the same
      lm_.kv_hold_block(row[i]);
      host_blocks_.lru.erase({e.host_block_used, id});
      host_blocks_.free.push_back(std::exchange(e.host_block, -1));
      e.block = row[i];
      lru_.emplace(std::pair{e.used, id}, id);
    }
    chain.push_back(id);
    previous = id;
  }
  clock_ += chain.size();
  for (size_t i = 0; i < chain.size(); ++i) touch(chain[i], clock_ - i);
  return chain.empty() ? 0 : chain.back();
}

// A state copy's use is its own: the one a hit resumes from (or the newest) is the most recent,
// not the shallower copies of the same chain that a block's use would rank above it.
void PrefixCache::touch_state(uint64_t id) {
  Entry& e = entries_.at(id);
  state_lru_.erase({e.state_used, id});
  e.state_used = ++state_clock_;
  state_lru_.emplace(std::pair{e.state_used, id}, id);
}

int32_t PrefixCache::take_state(bool anchor) {
  if (!free_states_.empty()) {
    const int32_t s = free_states_.back();
    free_states_.pop_back();
    return s;
  }
  // The copies are few (a handful per slot): a scan finds the oldest interval copy.
  auto victim = std::find_if(state_lru_.begin(), state_lru_.end(),
                             [&](const auto& kv) { return !entries_.at(kv.second).state_anchor; });
  if (victim == state_lru_.end()) {
    if (!anchor || state_lru_.empty()) return -1;
    victim = state_lru_.begin();
  }
  const uint64_t id = victim->second;
  state_lru_.erase(victim);
  Entry& e = entries_.at(id);
  const int32_t s = std::exchange(e.state, -1);
  ++state_evictions_;
  spill_state(id, s); // queued before whatever the copy is filled with next
  return s;
}

int32_t PrefixCache::offer_state(int32_t slot, std::span<const int32_t> tokens, bool anchor) {
  const auto B = static_cast<size_t>(block_tokens_);
  if (!recurrent_ || tokens.empty() || tokens.size() % B != 0 || lm_.kv_block_row(slot).size() < tokens.size() / B)
    return -1;
  const uint64_t id = offer_chain(slot, tokens);
  if (!id) return -1;
  Entry& e = entries_.at(id);
  if (e.state >= 0 || e.host_state >= 0) {
    e.state_anchor = e.state_anchor || anchor; // an interval point that is also a prompt's end
    return -1;
  }
  const int32_t s = take_state(anchor); // gives up another entry's copy: e holds none to give
  if (s < 0) return -1;
  e.state = s;
  e.state_anchor = anchor;
  touch_state(id);
  return s;
}

void PrefixCache::abandon_state(int32_t state) {
  for (auto it = state_lru_.begin(); it != state_lru_.end(); ++it)
    if (Entry& e = entries_.at(it->second); e.state == state) {
      e.state = -1;
      state_lru_.erase(it);
      free_states_.push_back(state);
      return;
    }
}

PrefixCache::Match PrefixCache::match(std::span<const int32_t> prompt, int64_t most_tokens) {
  Match m;
  std::vector<int32_t>& blocks = m.blocks;
  std::vector<uint64_t> chain;
  const size_t most = static_cast<size_t>(std::max<int64_t>(most_tokens, 0)) / static_cast<size_t>(block_tokens_);
  const size_t full = std::min(prompt.size() / static_cast<size_t>(block_tokens_), most);
  uint64_t previous = 0, h = 0;
  for (size_t i = 0; i < full; ++i) {
    const std::span<const int32_t> t = prompt.subspan(i * static_cast<size_t>(block_tokens_), block_tokens_);
    h = hash_(h, t);
    const uint64_t id = find(previous, h, t);
    if (!id) break;
    chain.push_back(id);
    previous = id;
  }
  // The chain found is in use from now on, whatever part of it a state copy makes resumable: its
  // device blocks become the most recently used (its host blocks too, once restore_block files
  // them under their use) and its host blocks the most recently spilled, so the room a restore
  // asks for (Engine::make_room evicts, and the evicted blocks spill) is taken from other chains,
  // not from this one's blocks. This is the match's only use mark: deeper blocks count as used
  // before shallower ones in both tiers, as offer_chain orders them.
  clock_ += chain.size();
  for (size_t i = chain.size(); i-- > 0;) {
    Entry& e = entries_.at(chain[i]);
    if (e.block >= 0) {
      touch(chain[i], clock_ - i);
      continue;
    }
    e.used = clock_ - i;
    host_blocks_.lru.erase({e.host_block_used, chain[i]});
    e.host_block_used = ++host_clock_;
    host_blocks_.lru.emplace(std::pair{e.host_block_used, chain[i]}, chain[i]);
  }
  // A recurrent model's chain ends where a state copy (on the device or the host) resumes it.
  const auto resumable = [&] {
    while (recurrent_ && !chain.empty() && entries_.at(chain.back()).state < 0 && entries_.at(chain.back()).host_state < 0)
      chain.pop_back();
  };
  resumable();
  // Blocks on the host come back into free blocks, as far as there are any.
  for (size_t i = 0; i < chain.size(); ++i)
    if (entries_.at(chain[i]).block < 0 && !restore_block(chain[i])) {
      for (size_t j = i; j < chain.size(); ++j) m.missing += entries_.at(chain[j]).block < 0;
      chain.resize(i);
      resumable();
      break;
    }
  if (recurrent_ && !chain.empty()) {
    if (entries_.at(chain.back()).state < 0) restore_state(chain.back());
    m.state = entries_.at(chain.back()).state;
    touch_state(chain.back());
  }
  for (uint64_t id : chain) blocks.push_back(entries_.at(id).block);
  return m;
}

bool PrefixCache::evict_one() {
  for (const auto& [key, id] : lru_)
    if (lm_.kv_block_holders(entries_.at(id).block) == 1) {
      if (!spill_block(id)) erase(id); // to the host tier where it is on
      ++evictions_;
      return true;
    }
  return false;
}

} // namespace ninfer::serving
