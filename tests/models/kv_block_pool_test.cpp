// The KV block pool's accounting with shared blocks (core/models/kv_block_pool.hpp): random
// sequences of ensure, share, writes (copy-on-write), trim and release over a pool smaller than
// every slot's whole context, checked after every operation against an independent model: each
// slot's expected content per block index (what its writes left there) against a simulated
// device memory written through the pool's table and copies; each block's holders counted
// from the rows; the free count; and that a block handed out was free. The admission outlook is
// checked against doing what it predicts.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "kv_block_pool.hpp"
#include "model_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;
using ninfer::models::KvBlockPool;

namespace {

constexpr int32_t kSlots = 4;
constexpr int64_t kContext = 256;
constexpr int32_t kBlockTokens = 32;
constexpr int64_t kPoolBlocks = 19; // fewer than the 32 of every slot's whole context

// The pool with a reference beside it: `memory` stands for a layer's KV storage (one value per
// block), `expected[s][i]` for what slot s last wrote at block index i.
struct Checked {
  Backend be = cpu_model_backend();
  KvBlockPool pool{be, kSlots, kContext, kBlockTokens, kPoolBlocks};
  std::vector<int64_t> memory = std::vector<int64_t>(kPoolBlocks, -1);
  std::vector<std::vector<int64_t>> expected = std::vector<std::vector<int64_t>>(kSlots);
  int64_t next_value = 0;

  std::set<int32_t> held_anywhere() const {
    std::set<int32_t> out;
    for (int32_t s = 0; s < kSlots; ++s)
      for (int64_t i = 0; i < pool.held_blocks(s); ++i) out.insert(pool.host_row(s)[i]);
    return out;
  }

  // Writes positions [from, to) of `slot` as CausalLM does: the copies first, then new blocks,
  // then a fresh value in every block the write touches. False when the pool refuses.
  bool write(int32_t slot, int64_t from, int64_t to) {
    const KvBlockPool::Write w{slot, from, to};
    const int64_t take = pool.blocks_to_take(std::span(&w, 1));
    if (take > pool.free_blocks()) return false;
    const int64_t free_before = pool.free_blocks();
    const std::set<int32_t> before = held_anywhere();
    for (const KvBlockPool::Copy& c : pool.make_private(slot, from, to)) {
      EXPECT_FALSE(before.contains(c.to)) << "block " << c.to << " handed out while held";
      memory[static_cast<size_t>(c.to)] = memory[static_cast<size_t>(c.from)];
    }
    const int64_t held = pool.held_blocks(slot);
    EXPECT_TRUE(pool.ensure(slot, to));
    for (int64_t i = held; i < pool.held_blocks(slot); ++i)
      EXPECT_FALSE(before.contains(pool.host_row(slot)[i])) << "block handed out while held";
    EXPECT_EQ(free_before - pool.free_blocks(), take) << "blocks_to_take counts what the write takes";
    auto& e = expected[static_cast<size_t>(slot)];
    e.resize(static_cast<size_t>(pool.held_blocks(slot)), -1);
    for (int64_t i = from / kBlockTokens; i < pool.blocks_for(to); ++i) {
      memory[static_cast<size_t>(pool.host_row(slot)[i])] = next_value;
      e[static_cast<size_t>(i)] = next_value++;
    }
    return true;
  }

  void share(int32_t dst, int32_t src, int64_t blocks) {
    pool.share(dst, src, blocks);
    auto& d = expected[static_cast<size_t>(dst)];
    const auto& s = expected[static_cast<size_t>(src)];
    d.resize(std::max<size_t>(d.size(), static_cast<size_t>(blocks)), -1);
    std::copy(s.begin(), s.begin() + blocks, d.begin());
  }

  void trim(int32_t slot, int64_t positions) {
    pool.trim(slot, positions);
    expected[static_cast<size_t>(slot)].resize(static_cast<size_t>(pool.held_blocks(slot)));
  }

  // Every invariant, from the rows alone.
  void check(const std::string& after) const {
    std::map<int32_t, int32_t> holders;
    for (int32_t s = 0; s < kSlots; ++s) {
      const int32_t* r = pool.host_row(s);
      std::set<int32_t> in_row;
      for (int64_t i = 0; i < pool.blocks_per_slot(); ++i) {
        if (i >= pool.held_blocks(s)) {
          ASSERT_EQ(r[i], -1) << after << ": slot " << s << " entry " << i << " past what it holds";
          continue;
        }
        ASSERT_GE(r[i], 0) << after;
        ASSERT_LT(r[i], kPoolBlocks) << after;
        ASSERT_TRUE(in_row.insert(r[i]).second) << after << ": block " << r[i] << " twice in slot " << s << "'s row";
        ++holders[r[i]];
        ASSERT_EQ(memory[static_cast<size_t>(r[i])], expected[static_cast<size_t>(s)][static_cast<size_t>(i)])
            << after << ": slot " << s << " block index " << i << " reads another slot's write";
      }
    }
    for (int32_t b = 0; b < kPoolBlocks; ++b) {
      const auto it = holders.find(b);
      ASSERT_EQ(pool.holders(b), it == holders.end() ? 0 : it->second) << after << ": block " << b;
    }
    ASSERT_EQ(pool.free_blocks(), kPoolBlocks - static_cast<int64_t>(holders.size())) << after;
    for (int32_t s = 0; s < kSlots; ++s) {
      const int32_t* r = pool.host_row(s);
      ASSERT_EQ(pool.shared_blocks(s),
                std::count_if(r, r + pool.held_blocks(s), [&](int32_t b) { return holders.at(b) > 1; }))
          << after;
    }
  }
};

} // namespace

// A shared block stays held until its last holder drops it; a write into it gives the writer a
// copy and leaves the other holder the original; two writes into one shared block copy it once;
// a write past the free blocks is counted and refused, taking nothing.
TEST(KvBlockPool, SharedBlocksStayHeldUntilTheirLastHolderDropsThem) {
  Checked c;
  ASSERT_TRUE(c.write(0, 0, 100)); // 4 blocks, the last one partly written
  c.check("the first write");
  c.share(1, 0, 4);
  c.check("sharing");
  EXPECT_EQ(c.pool.free_blocks(), kPoolBlocks - 4);
  EXPECT_EQ(c.pool.shared_blocks(0), 4);
  EXPECT_EQ(c.pool.shared_blocks(1), 4);
  const KvBlockPool::Write w{1, 100, 101};
  EXPECT_EQ(c.pool.blocks_to_take(std::span(&w, 1)), 1);
  ASSERT_TRUE(c.write(1, 100, 101));
  c.check("a write into a shared block");
  EXPECT_EQ(c.pool.shared_blocks(1), 3);
  EXPECT_EQ(c.pool.shared_blocks(0), 3);
  c.trim(0, 0);
  c.check("the first holder's release");
  EXPECT_EQ(c.pool.free_blocks(), kPoolBlocks - 4) << "slot 1 still holds every block";
  EXPECT_EQ(c.pool.shared_blocks(1), 0);
  c.trim(1, 0);
  c.check("the last holder's release");
  EXPECT_EQ(c.pool.free_blocks(), kPoolBlocks);

  ASSERT_TRUE(c.write(2, 0, 40));
  c.share(3, 2, 2);
  const std::array<KvBlockPool::Write, 2> both{{{2, 40, 41}, {3, 40, 41}}};
  EXPECT_EQ(c.pool.blocks_to_take(both), 1);
  ASSERT_TRUE(c.write(0, 0, kContext));
  ASSERT_TRUE(c.write(1, 0, kContext));
  ASSERT_EQ(c.pool.free_blocks(), 1);
  const KvBlockPool::Write more{2, 40, kContext}; // 6 more blocks and a copy of the shared second
  EXPECT_EQ(c.pool.blocks_to_take(std::span(&more, 1)), 7);
  EXPECT_FALSE(c.write(2, 40, kContext));
  EXPECT_FALSE(c.pool.ensure(2, kContext));
  EXPECT_EQ(c.pool.held_blocks(2), 2) << "a refused ensure takes nothing";
  EXPECT_EQ(c.pool.free_blocks(), 1);
  c.check("the refusals");
}

// Random operations on four slots; after each, every invariant holds.
TEST(KvBlockPool, AccountingHoldsThroughRandomShareWriteTrimAndRelease) {
  auto rng = fresh_rng("KvBlockPool random operations");
  Checked c;
  const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int64_t writes = 0, copies_seen = 0, refused = 0;
  for (int step = 0; step < 4000; ++step) {
    const auto slot = static_cast<int32_t>(pick(0, kSlots - 1));
    const int64_t held_positions = c.pool.held_blocks(slot) * kBlockTokens;
    std::string what;
    switch (pick(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4: { // a write from inside or at the end of what the slot holds
        const int64_t from = pick(0, std::min<int64_t>(held_positions, kContext - 1));
        const int64_t to = pick(from + 1, std::min<int64_t>(from + 120, kContext));
        const int64_t shared_before = c.pool.shared_blocks(slot);
        what = fmt::format("write of slot {} [{}, {})", slot, from, to);
        if (c.write(slot, from, to)) {
          ++writes;
          copies_seen += c.pool.shared_blocks(slot) < shared_before;
        } else {
          ++refused;
        }
        break;
      }
      case 5:
      case 6: { // share a prefix of another slot's blocks
        const auto src = static_cast<int32_t>(pick(0, kSlots - 1));
        if (src == slot || c.pool.held_blocks(src) == 0) continue;
        const int64_t blocks = pick(1, c.pool.held_blocks(src));
        what = fmt::format("share of slot {}'s {} blocks into slot {}", src, blocks, slot);
        c.share(slot, src, blocks);
        break;
      }
      case 7: {
        const int64_t keep = pick(0, held_positions);
        what = fmt::format("trim of slot {} to {}", slot, keep);
        c.trim(slot, keep);
        break;
      }
      case 8:
        what = fmt::format("release of slot {}", slot);
        c.trim(slot, 0);
        break;
      case 9: { // the outlook, then what it predicts
        const int64_t keep = pick(0, held_positions);
        const int64_t to = pick(keep + 1, kContext);
        std::vector<int32_t> released;
        for (int32_t s = 0; s < kSlots; ++s)
          if (s != slot && pick(0, 1)) released.push_back(s);
        const KvBlockPool::Outlook o = c.pool.outlook(slot, keep, keep, to, released);
        c.trim(slot, keep);
        for (int32_t s : released) c.trim(s, 0);
        const KvBlockPool::Write w{slot, keep, to};
        what = fmt::format("outlook of slot {} keeping {} writing to {}", slot, keep, to);
        EXPECT_EQ(o.free, c.pool.free_blocks()) << what;
        EXPECT_EQ(o.take, c.pool.blocks_to_take(std::span(&w, 1))) << what;
        break;
      }
    }
    c.check(what);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(writes, 500);
  EXPECT_GT(copies_seen, 20) << "too few writes into shared blocks to test copy-on-write";
  EXPECT_GT(refused, 0) << "the pool never ran short: the refusals went untested";
}

// The prefix cache's hold (KvBlockPool::hold): a held block outlives the rows that held it, is
// evictable only once no row holds it, is copied before a row writes into it, and an adopting
// row shares it. The outlook's evictable count equals what giving those blocks back frees.
TEST(KvBlockPool, CacheHeldBlocksOutliveTheirRowsAndAreEvictableWhenAlone) {
  auto rng = fresh_rng("kv block pool cache holds");
  Backend be = cpu_model_backend();
  KvBlockPool pool{be, kSlots, kContext, kBlockTokens, kPoolBlocks};
  std::uniform_int_distribution<int64_t> len(kBlockTokens, 3 * kBlockTokens);
  const int64_t positions = len(rng);
  ASSERT_TRUE(pool.ensure(0, positions));
  const int64_t full = positions / kBlockTokens;
  std::vector<int32_t> cached(pool.host_row(0), pool.host_row(0) + full);
  for (int32_t b : cached) pool.hold(b);
  EXPECT_THROW(pool.hold(cached[0]), Error);
  EXPECT_EQ(pool.evictable_blocks(), 0);
  const int64_t free_before = pool.free_blocks();
  // Slot 1 adopts the cached blocks; slot 0 lets go: the blocks stay, held by slot 1 and the cache.
  pool.adopt(1, cached);
  pool.release(0);
  EXPECT_EQ(pool.free_blocks(), free_before + pool.blocks_for(positions) - full);
  EXPECT_EQ(pool.evictable_blocks(), 0);
  for (int32_t b : cached) EXPECT_EQ(pool.holders(b), 2);
  // A write into adopted blocks copies them first: one copy per adopted block it touches, and a
  // new block past them.
  const KvBlockPool::Write w{1, kBlockTokens - 1, kBlockTokens + 1};
  EXPECT_EQ(pool.blocks_to_take(std::span(&w, 1)), 2);
  // The outlook with slot 1 released counts every cached block as evictable, and giving them back
  // frees exactly that many.
  const std::vector<int32_t> released{1};
  const KvBlockPool::Outlook o = pool.outlook(2, 0, 0, kBlockTokens, released);
  EXPECT_EQ(o.evictable, full);
  pool.release(1);
  EXPECT_EQ(pool.evictable_blocks(), full);
  const int64_t free_alone = pool.free_blocks();
  EXPECT_EQ(free_alone, o.free);
  for (int32_t b : cached) pool.unhold(b);
  EXPECT_EQ(pool.free_blocks(), free_alone + full);
  EXPECT_EQ(pool.free_blocks(), kPoolBlocks);
  EXPECT_THROW(pool.unhold(cached[0]), Error);
  EXPECT_THROW(pool.adopt(2, cached), Error) << "adopting a free block";
}
