#include "ninfer/serving/prefix_cache.hpp"

#include <algorithm>

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
    : lm_(lm), hash_(hash ? std::move(hash) : Hash(default_hash)), block_tokens_(lm.kv_block_tokens()) {
  if (!lm.can_truncate())
    throw Error("internal: a prefix cache of KV blocks on a model whose slots hold state besides their KV rows");
}

PrefixCache::~PrefixCache() {
  for (const auto& [id, e] : entries_) lm_.kv_unhold_block(e.block);
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
  const Entry& e = entries_.at(id);
  lm_.kv_unhold_block(e.block);
  lru_.erase({e.used, id});
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
void PrefixCache::offer(int32_t slot, std::span<const int32_t> tokens) {
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
    }
    chain.push_back(id);
    previous = id;
  }
  clock_ += chain.size();
  for (size_t i = 0; i < chain.size(); ++i) touch(chain[i], clock_ - i);
}

std::vector<int32_t> PrefixCache::match(std::span<const int32_t> prompt, int64_t most_tokens) {
  std::vector<int32_t> blocks;
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
    blocks.push_back(entries_.at(id).block);
    previous = id;
  }
  clock_ += chain.size();
  for (size_t i = 0; i < chain.size(); ++i) touch(chain[i], clock_ - i);
  return blocks;
}

bool PrefixCache::evict_one() {
  for (const auto& [key, id] : lru_)
    if (lm_.kv_block_holders(entries_.at(id).block) == 1) {
      erase(id);
      ++evictions_;
      return true;
    }
  return false;
}

} // namespace ninfer::serving
