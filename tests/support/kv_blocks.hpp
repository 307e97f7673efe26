// Block tables of a paged KV cache for tests (ninfer/abi/ops/kv_append.h): the identity table
// (every slot owns its full capacity, blocks in slot order) and a shuffled one (the same blocks
// per slot, drawn in a random order from a pool with blocks no slot owns), plus the address rule
// written from the contract's text, so tests check the plugins' addressing against their own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "ninfer/abi/ops/kv_append.h"

namespace ninfer::test {

struct KvBlockLayout {
  int32_t slots = 0, block_tokens = 0, blocks_per_slot = 0, pool_blocks = 0;
  std::vector<int32_t> table; // [slots, blocks_per_slot]

  int32_t capacity() const { return blocks_per_slot * block_tokens; }
  int64_t pool_rows() const { return int64_t{pool_blocks} * block_tokens; }

  // `slots` x ceil(positions / block_tokens) blocks; block i of slot s is s * blocks_per_slot + i.
  static KvBlockLayout identity(int32_t slots, int32_t positions, int32_t block_tokens) {
    KvBlockLayout l;
    l.slots = slots;
    l.block_tokens = block_tokens;
    l.blocks_per_slot = (positions + block_tokens - 1) / block_tokens;
    l.pool_blocks = slots * l.blocks_per_slot;
    l.table.resize(static_cast<size_t>(l.pool_blocks));
    std::iota(l.table.begin(), l.table.end(), 0);
    return l;
  }
  // The identity's blocks per slot, in a pool of `spare` more blocks, each slot's blocks drawn
  // in a random order from a random permutation of the pool (so no slot's blocks are in order
  // or adjacent by design, and the spare blocks are nobody's).
  static KvBlockLayout shuffled(int32_t slots, int32_t positions, int32_t block_tokens, int32_t spare,
                                std::mt19937_64& rng) {
    KvBlockLayout l = identity(slots, positions, block_tokens);
    l.pool_blocks += spare;
    std::vector<int32_t> ids(static_cast<size_t>(l.pool_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::copy(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(l.table.size()), l.table.begin());
    return l;
  }

  // Sets the cache's layout fields; `table_ptr` is where the kernels read the table (this
  // layout's table for host plugins, a device copy of it for CUDA).
  void attach(ninfer_kv_cache& c, const int32_t* table_ptr) const {
    c.slots = slots;
    c.capacity = capacity();
    c.block_table = table_ptr;
    c.block_tokens = block_tokens;
    c.blocks_per_slot = blocks_per_slot;
    c.pool_blocks = pool_blocks;
  }
  ninfer_kv_cache cache(void* k, void* v, int32_t kv_heads, int32_t head_dim, int32_t dtype) const {
    ninfer_kv_cache c{};
    c.k = k;
    c.v = v;
    c.kv_heads = kv_heads;
    c.head_dim = head_dim;
    c.dtype = dtype;
    attach(c, table.data());
    return c;
  }

  // The pool row (block * block_tokens + offset) of (slot, pos), from the contract's rule.
  int64_t row(int32_t slot, int32_t pos) const {
    return int64_t{table[static_cast<size_t>(slot) * blocks_per_slot + pos / block_tokens]} * block_tokens +
           pos % block_tokens;
  }
  // Whether pool block b is in some slot's row of the table.
  std::vector<bool> owned() const {
    std::vector<bool> o(static_cast<size_t>(pool_blocks), false);
    for (int32_t b : table) o[static_cast<size_t>(b)] = true;
    return o;
  }
};

} // namespace ninfer::test
