// What the decoder layer blocks share: the scratch activations a block may use during one
// step (allocated once by the decoder, sized for the widest block), and the token-mixer
// interface that full attention and Gated DeltaNet implement.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ninfer/runtime/backend.hpp"
#include "op_calls.hpp"
#include "step.hpp"

namespace ninfer::models {

// Float32 elements per token a block needs in each scratch buffer.
struct ScratchNeeds {
  int64_t proj = 0;  // projection outputs (q|gate|k|v, qkv|z, gate|up)
  int64_t inner = 0; // attention output, conv output, MLP activation
  int64_t core = 0;  // GDN recurrence output
  int64_t gates = 0; // GDN g and beta

  ScratchNeeds max(const ScratchNeeds& o) const {
    return {std::max(proj, o.proj), std::max(inner, o.inner), std::max(core, o.core), std::max(gates, o.gates)};
  }
};

struct Scratch {
  ops::Rows proj, inner, core;
  float* gates = nullptr; // [tokens, gates-per-token], contiguous
};

// A layer's token mixer: reads the residual stream through its input norm (`in`, normed by its
// first projection), adds its output to the residual stream `resid` (its last projection
// accumulates), keeps whatever per-slot state it needs.
class Mixer {
 public:
  virtual ~Mixer() = default;
  virtual ScratchNeeds needs() const = 0;
  virtual void forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in,
                       ops::Rows resid) = 0;
  // The slot starts a new sequence.
  virtual void reset(Backend& be, int32_t slot) = 0;
  // Copies the slot's state to state copy `copy`, or copy `copy` back into the slot (queued in
  // stream order). Copies: the slots' snapshots first (copy = slot, StepLimits::state_snapshots),
  // then the prefix cache's (StepLimits::prefix_states; state_copy_index). A mixer whose state is
  // per token (KV rows) has nothing to copy.
  virtual void save_state(Backend&, int32_t /*slot*/, int32_t /*copy*/) {}
  virtual void load_state(Backend&, int32_t /*slot*/, int32_t /*copy*/) {}
  // The sequence state of slot `src` becomes slot `dst`'s too (CausalLM::fork; queued in stream
  // order): a recurrent mixer copies its state (and its snapshot, where it keeps one). Attention
  // keeps its rows in KV blocks, which the slots share (copy_kv_block).
  virtual void fork(Backend&, int32_t /*src*/, int32_t /*dst*/) {}
  // Attention: the rows of KV block `from` (every position, K and V, a compact format's scales)
  // into block `to` (KvBlockPool::make_private's copies). Nothing for a mixer without KV rows.
  virtual void copy_kv_block(Backend&, int32_t /*from*/, int32_t /*to*/) {}
  // The prefix cache's host tier: bytes of one KV block's rows (attention) and of one prefix-state
  // copy (a recurrent mixer), and their copies into host memory at `offset` and back (queued in
  // stream order). Nothing for a mixer without them.
  virtual size_t kv_block_bytes() const { return 0; }
  virtual void spill_kv_block(Backend&, int32_t /*block*/, const HostBuffer&, size_t /*offset*/) {}
  virtual void unspill_kv_block(Backend&, int32_t /*block*/, const HostBuffer&, size_t /*offset*/) {}
  virtual size_t prefix_state_bytes() const { return 0; }
  virtual void spill_prefix_state(Backend&, int32_t /*entry*/, const HostBuffer&, size_t /*offset*/) {}
  virtual void unspill_prefix_state(Backend&, int32_t /*entry*/, const HostBuffer&, size_t /*offset*/) {}
  // The state a speculative round settles (Step::keep_token_states), one entry per kind of state:
  // rows of `words` 32-bit words, one per slot (`slots`) and one per token of a verification pass
  // (`tokens`, written by the pass). After the pass each sequence's slot takes the row of the
  // token it kept; the decoder copies every layer's rows of one kind in one call
  // (Decoder::keep_token_states). Attention keeps nothing: KV rows past a sequence's length are
  // never read.
  struct KeptState {
    int64_t words;
    void* slots;
    const void* tokens;
  };
  virtual std::vector<KeptState> kept_states() const { return {}; }
};

} // namespace ninfer::models
