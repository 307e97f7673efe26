// Prompt reuse across requests in the same slot (the serving engine's prefix cache): a finished
// request leaves its tokens' KV rows and Gated DeltaNet state in its slot, and the next request
// whose prompt starts with them (the next turn of a chat: the earlier turns, the reply, then the
// new message) takes that slot and reads only the rest of its prompt.
//
// What can be reused depends on the model. Attention layers hold one KV row per token, so any
// common prefix of the slot's tokens and the prompt is reusable (the slot is truncated to it).
// A Gated DeltaNet layer holds one recurrent state for all the slot's tokens, which cannot be
// rewound: a hybrid model reuses a slot when all its tokens begin the prompt, or else, with
// state snapshots (ModelOptions::state_snapshots), from the end of the slot's last prompt, when
// that prompt begins the new one (a chat template that re-renders the reply differently, or
// drops its reasoning, still shares every earlier turn).
//
// A slot's tokens are known exactly: a sequence feeds its prompt, then its picks in order (each
// pick is fed by the step after it, queued before the host reads the pick), so the first
// position() of prompt + generated ids + stop token are what the slot holds; a slot that fed a
// pick nobody read (a cancelled request) is forgotten.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::serving {

class SlotReuse {
 public:
  // `rewindable`: the model can truncate a slot (CausalLM::can_truncate, no Gated DeltaNet).
  // `enabled` false: choose() always reuses nothing (--no-prefix-cache).
  SlotReuse(int32_t slots, bool rewindable, bool enabled);

  struct Choice {
    int32_t slot = -1;
    int64_t reuse = 0;    // leading prompt tokens the slot already holds (at most prompt size - 1)
    bool restore = false; // they are the snapshot's: restore it first (CausalLM::restore_snapshot)
  };
  // The free slot to run `prompt` in: the one that reuses the most, else the one used least
  // recently (so a recent conversation's tokens stay longest). `free_slots` is not empty.
  Choice choose(std::span<const int32_t> prompt, std::span<const int32_t> free_slots) const;

  // A sequence ended in `slot` after feeding `fed` tokens (CausalLM::position): `tokens` is its
  // prompt, generated ids and stop token in order. Fed tokens beyond `tokens` are unknown: the
  // slot is then forgotten but for its snapshot. `snapshot`: the position of the slot's state
  // snapshot (CausalLM::snapshot_position), -1 for none.
  void ended(int32_t slot, std::vector<int32_t> tokens, int64_t fed, int64_t snapshot = -1);
  // The slot holds nothing reusable (an error, a reset).
  void forget(int32_t slot);
  // Tokens the slot holds as far as reuse knows (for tests and logs).
  std::span<const int32_t> tokens(int32_t slot) const;

 private:
  struct Slot {
    std::vector<int32_t> tokens;   // what the slot holds
    std::vector<int32_t> snapshot; // the tokens its snapshot holds
    uint64_t last_used = 0;        // ended() order; 0: never used
  };
  Choice reusable(const Slot& s, std::span<const int32_t> prompt) const;

  std::vector<Slot> slots_;
  bool rewindable_;
  bool enabled_;
  uint64_t clock_ = 0;
};

} // namespace ninfer::serving
