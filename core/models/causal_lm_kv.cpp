// CausalLM's KV blocks (docs/memory.md, "The KV block pool"): what slots hold, the blocks a
// write takes (copy-on-write of shared blocks included), admission arithmetic, and fork, which
// makes one slot's sequence another's by sharing its blocks.
#include <fmt/format.h>

#include <algorithm>

#include "decoder.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

int32_t CausalLM::kv_block_tokens() const { return decoder_->kv_pool().block_tokens(); }
int64_t CausalLM::kv_blocks_total() const { return decoder_->kv_pool().total_blocks(); }
int64_t CausalLM::kv_blocks_free() const { return decoder_->kv_pool().free_blocks(); }
int64_t CausalLM::kv_blocks_held(int32_t slot) const {
  check_slot(slot);
  return decoder_->kv_pool().held_blocks(slot);
}
int64_t CausalLM::kv_blocks_shared(int32_t slot) const {
  check_slot(slot);
  return decoder_->kv_pool().shared_blocks(slot);
}
int64_t CausalLM::kv_blocks_for(int64_t positions) const { return decoder_->kv_pool().blocks_for(positions); }

int64_t CausalLM::kv_write_start(int64_t position) const {
  return decoder_->speculative() ? std::max<int64_t>(position - 1, 0) : position;
}

CausalLM::KvWrite CausalLM::kv_write(int32_t slot, int64_t to) const {
  return {slot, kv_write_start(positions_[static_cast<size_t>(slot)]), to};
}

bool CausalLM::reserve_kv(int32_t slot, int64_t positions) {
  check_slot(slot);
  if (positions > options_.max_context) return false;
  const KvWrite w = kv_write(slot, positions);
  const models::KvBlockPool::Write pw{w.slot, w.from, w.to};
  const models::KvBlockPool& pool = decoder_->kv_pool();
  if (pool.blocks_to_take(std::span(&pw, 1)) > pool.free_blocks()) return false;
  take_kv_blocks(std::span(&w, 1));
  return true;
}

CausalLM::KvOutlook CausalLM::kv_outlook(int32_t slot, int64_t keep, int64_t positions,
                                         std::span<const int32_t> released, std::span<const int32_t> adopt) const {
  check_slot(slot);
  for (int32_t s : released) check_slot(s);
  const models::KvBlockPool& pool = decoder_->kv_pool();
  for (int32_t b : adopt)
    if (b < 0 || b >= pool.total_blocks()) throw Error(fmt::format("kv_outlook: KV block {} does not exist", b));
  if (!adopt.empty()) keep = static_cast<int64_t>(adopt.size()) * pool.block_tokens();
  const models::KvBlockPool::Outlook o = pool.outlook(slot, keep, kv_write_start(keep), positions, released, adopt);
  return {o.take, o.free, o.evictable};
}

std::span<const int32_t> CausalLM::kv_block_row(int32_t slot) const {
  check_slot(slot);
  const models::KvBlockPool& pool = decoder_->kv_pool();
  return {pool.host_row(slot), static_cast<size_t>(pool.held_blocks(slot))};
}

void CausalLM::kv_hold_block(int32_t block) { decoder_->kv_pool().hold(block); }
void CausalLM::kv_unhold_block(int32_t block) { decoder_->kv_pool().unhold(block); }
int32_t CausalLM::kv_block_holders(int32_t block) const {
  const models::KvBlockPool& pool = decoder_->kv_pool();
  if (block < 0 || block >= pool.total_blocks()) throw Error(fmt::format("KV block {} does not exist", block));
  return pool.holders(block);
}
int64_t CausalLM::kv_blocks_evictable() const { return decoder_->kv_pool().evictable_blocks(); }

int32_t CausalLM::prefix_states() const {
  return config_.num_layers_of(LayerKind::LinearAttention) > 0 ? options_.prefix_states : 0;
}

void CausalLM::save_prefix_state(int32_t slot, int32_t entry) {
  check_slot(slot);
  check_no_round(slot);
  if (entry < 0 || entry >= prefix_states())
    throw Error(fmt::format("save_prefix_state: copy {} of {}", entry, prefix_states()));
  decoder_->save_prefix_state(slot, entry);
}

size_t CausalLM::kv_block_bytes() const { return decoder_->kv_block_bytes(); }
size_t CausalLM::prefix_state_bytes() const { return decoder_->prefix_state_bytes(); }
HostBuffer CausalLM::allocate_host(size_t bytes, std::string_view what) { return backend_.allocate_host(bytes, what); }
void CausalLM::synchronize() { backend_.synchronize(); }
int32_t CausalLM::kv_take_block_for_cache() { return decoder_->kv_pool().take_for_cache(); }

namespace {
void check_block(const models::KvBlockPool& pool, int32_t block, const char* what) {
  if (block < 0 || block >= pool.total_blocks()) throw Error(fmt::format("{}: KV block {} does not exist", what, block));
}
} // namespace

void CausalLM::spill_kv_block(int32_t block, const HostBuffer& to, size_t offset) {
  check_block(decoder_->kv_pool(), block, "spill_kv_block");
  decoder_->spill_kv_block(block, to, offset);
}

void CausalLM::unspill_kv_block(int32_t block, const HostBuffer& from, size_t offset) {
  check_block(decoder_->kv_pool(), block, "unspill_kv_block");
  decoder_->unspill_kv_block(block, from, offset);
}

void CausalLM::spill_prefix_state(int32_t entry, const HostBuffer& to, size_t offset) {
  if (entry < 0 || entry >= prefix_states()) throw Error(fmt::format("spill_prefix_state: copy {} of {}", entry, prefix_states()));
  decoder_->spill_prefix_state(entry, to, offset);
}

void CausalLM::unspill_prefix_state(int32_t entry, const HostBuffer& from, size_t offset) {
  if (entry < 0 || entry >= prefix_states())
    throw Error(fmt::format("unspill_prefix_state: copy {} of {}", entry, prefix_states()));
  decoder_->unspill_prefix_state(entry, from, offset);
}

void CausalLM::adopt_prefix(int32_t slot, std::span<const int32_t> blocks, int32_t state) {
  check_slot(slot);
  check_no_round(slot);
  if (options_.speculation.on())
    throw Error("adopt_prefix: a slot of a model loaded for speculation holds its last hidden state besides its KV "
                "rows, which shared blocks do not give it");
  const bool recurrent = !can_truncate();
  if (recurrent && (state < 0 || state >= prefix_states()))
    throw Error(fmt::format("adopt_prefix: a model with Gated DeltaNet layers adopts blocks with the state saved where "
                            "they end (copy {} of {})",
                            state, prefix_states()));
  if (!recurrent && state >= 0) throw Error("adopt_prefix: a state copy for a model without Gated DeltaNet layers");
  models::KvBlockPool& pool = decoder_->kv_pool();
  const int64_t positions = static_cast<int64_t>(blocks.size()) * pool.block_tokens();
  if (positions > options_.max_context)
    throw Error(fmt::format("adopt_prefix: {} blocks hold {} positions, past the context {}", blocks.size(), positions,
                            options_.max_context));
  for (int32_t b : blocks)
    if (b < 0 || b >= pool.total_blocks() || pool.holders(b) == 0)
      throw Error(fmt::format("adopt_prefix: KV block {} is free or does not exist", b));
  reset(slot);
  pool.adopt(slot, blocks);
  pool.sync();
  if (recurrent) decoder_->load_prefix_state(slot, state);
  positions_[static_cast<size_t>(slot)] = positions;
}

void CausalLM::release_kv(int32_t slot) {
  reset(slot);
  decoder_->kv_pool().release(slot); // the table upload comes with the next step that takes blocks
}

void CausalLM::trim_kv(int32_t slot) {
  check_slot(slot);
  check_no_round(slot);
  decoder_->kv_pool().trim(slot, positions_[static_cast<size_t>(slot)]);
}

// The copies are queued before the table upload and the step that writes the new blocks, after
// every step queued so far (which still read or write the old ones): stream order is enough.
void CausalLM::take_kv_blocks(std::span<const KvWrite> writes) {
  models::KvBlockPool& pool = decoder_->kv_pool();
  std::vector<models::KvBlockPool::Write> w;
  for (const KvWrite& k : writes) {
    if (k.to > pool.capacity())
      throw Error(fmt::format("internal: a write to position {} of slot {} past the KV capacity {}", k.to, k.slot,
                              pool.capacity()));
    w.push_back({k.slot, k.from, k.to});
  }
  const int64_t lack = pool.blocks_to_take(w);
  if (lack > pool.free_blocks())
    throw Error(fmt::format("the KV cache is out of blocks: the step needs {} more blocks of {} tokens and {} of {} "
                            "are free; release finished sequences (release_kv) first",
                            lack, pool.block_tokens(), pool.free_blocks(), pool.total_blocks()));
  for (const KvWrite& k : writes) {
    decoder_->copy_kv_blocks(pool.make_private(k.slot, k.from, k.to));
    pool.ensure(k.slot, k.to);
  }
  pool.sync();
}

void CausalLM::fork(int32_t src, int32_t dst) {
  check_slot(src);
  check_slot(dst);
  if (src == dst) throw Error(fmt::format("fork: slot {} cannot be forked into itself", src));
  for (int32_t s : {src, dst})
    if (round_unread_[static_cast<size_t>(s)])
      throw Error(fmt::format("fork: slot {} has a speculative round whose result is not read: its position is known "
                              "only then (call next_result first)",
                              s));
  const int64_t pos = positions_[static_cast<size_t>(src)];
  if (pos == 0) throw Error(fmt::format("fork: slot {} holds no tokens: there is no sequence to copy", src));
  models::KvBlockPool& pool = decoder_->kv_pool();
  // dst shares every block of src's sequence, then copies those both slots write next: dst's own
  // blocks there are dropped first (freeing those no one else holds), so count them as free.
  const int64_t blocks = pool.blocks_for(pos), first_written = kv_write_start(pos) / pool.block_tokens();
  const int64_t copies = std::max<int64_t>(0, blocks - first_written);
  int64_t freed = 0;
  const int32_t* d = pool.host_row(dst);
  const int32_t* s = pool.host_row(src);
  for (int64_t i = 0; i < std::min(blocks, pool.held_blocks(dst)); ++i) freed += d[i] != s[i] && pool.holders(d[i]) == 1;
  if (copies > pool.free_blocks() + freed)
    throw Error(fmt::format("fork: the KV cache is out of blocks: slot {} needs {} private copies of blocks of {} "
                            "tokens and {} of {} are free; release finished sequences (release_kv) first",
                            dst, copies, pool.block_tokens(), pool.free_blocks() + freed, pool.total_blocks()));
  pool.share(dst, src, blocks);
  decoder_->copy_kv_blocks(pool.make_private(dst, kv_write_start(pos), pos));
  pool.sync();
  decoder_->fork(src, dst);
  const auto i = static_cast<size_t>(src), o = static_cast<size_t>(dst);
  positions_[o] = pos;
  snapshots_[o] = snapshots_[i];
  last_pick_[o] = last_pick_[i] ? std::make_unique<models::PickRef>(*last_pick_[i]) : nullptr;
  next_on_backend_[o] = next_on_backend_[i];
  round_unread_[o] = false;
  ++generation_[o]; // dst's own results still to be read change nothing now
}

} // namespace ninfer
