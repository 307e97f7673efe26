#include "ninfer/serving/engine.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <span>

#include "ninfer/generation/scheduler.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "sequence.hpp"

namespace ninfer::serving {

Engine::Engine(CausalLM& lm, const Tokenizer* tokenizer, EngineOptions options)
    : lm_(lm), tokenizer_(tokenizer), options_(options),
      // A speculating slot's position is settled only when its round is read, and its MTP head
      // keeps state a slot's tokens do not describe: no reuse there yet.
      reuse_(lm.options().max_sequences, lm.can_truncate(), options.prefix_cache && !lm.options().speculation.on()) {
  if (options_.max_pending < 0) throw Error("max_pending must be >= 0");
  // Shared blocks give a slot KV rows only: a model with Gated DeltaNet layers needs the cache's
  // state copies besides, and speculation's per-slot hidden state is in neither, so such a model
  // reuses within a slot only.
  if (const int64_t every = options_.prefix_state_interval; every < 0 || every % lm.kv_block_tokens() != 0)
    throw Error(fmt::format("the prefix cache's state interval must be a multiple of the KV block ({} tokens), or 0 "
                            "(got {})",
                            lm.kv_block_tokens(), every));
  if (options_.prefix_cache && (lm.can_truncate() || lm.prefix_states() > 0))
    cache_ = std::make_unique<PrefixCache>(lm, options_.prefix_hash);
  if (cache_ && options_.host_cache_bytes) {
    cache_->enable_host(options_.host_cache_bytes);
    kv_load_.host_restore_bytes_per_s = measure_restore();
  }
  kv_load_.kv_block_tokens = lm.kv_block_tokens();
  kv_load_.kv_blocks_total = lm.kv_blocks_total();
  count_blocks();
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  shutdown(true);
  cache_.reset(); // gives its holds back: the model may serve another engine
}

void Engine::count_blocks() {
  kv_load_.kv_blocks_free = lm_.kv_blocks_free();
  kv_load_.prefix_cache_blocks = cache_ ? cache_->blocks() : 0;
  kv_load_.prefix_cache_evictable = cache_ ? lm_.kv_blocks_evictable() : 0;
  kv_load_.prefix_cache_evictions = cache_ ? cache_->evictions() : 0;
  kv_load_.prefix_cache_states = cache_ ? cache_->states() : 0;
  if (cache_) kv_load_.host = cache_->host_counts();
  kv_load_.prefix_cache_state_evictions = cache_ ? cache_->state_evictions() : 0;
}

// The host tier's restore rate, before any request: a free block restored from host memory over
// and over (8 MiB of copies at least), waited for.
double Engine::measure_restore() {
  const int32_t block = lm_.kv_take_block_for_cache();
  if (block < 0) return 0;
  const size_t bytes = lm_.kv_block_bytes();
  const int copies = static_cast<int>(std::max<size_t>(8, (size_t{8} << 20) / std::max<size_t>(bytes, 1)));
  HostBuffer probe = lm_.allocate_host(bytes, "the host tier's restore probe");
  lm_.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < copies; ++i) lm_.unspill_kv_block(block, probe, 0);
  lm_.synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  lm_.kv_unhold_block(block);
  return s > 0 ? static_cast<double>(bytes) * copies / s : 0;
}

// A recurrent model resumes a cached prefix only where the cache holds the state after it: the
// prompt's chunks end at every prefix_state_interval-th position, at the request's state points
// (a chat's first message) and at the prompt's last block boundary, each a block boundary, and
// right after such a chunk is queued the blocks up to there and a copy of the slot's state go
// into the cache (queued before the slot's next step, so the copy is the state there). A later
// prompt beginning with those tokens (a shared system prompt, the next turn of a conversation in
// another slot) resumes from the deepest copy.
void Engine::add_state_points(SequenceHooks& h, int32_t slot, int64_t cached, const GenerationRequest& request) {
  const std::vector<int32_t>& prompt = request.prompt_ids;
  const int64_t B = lm_.kv_block_tokens(), every = options_.prefix_state_interval;
  const int64_t last = static_cast<int64_t>(prompt.size()) / B * B;
  std::vector<int64_t> marks; // the request's points as block boundaries, ascending
  for (const int64_t p : request.state_points)
    if (const int64_t b = p / B * B; b > cached && b < last) marks.push_back(b);
  std::sort(marks.begin(), marks.end());
  marks.erase(std::unique(marks.begin(), marks.end()), marks.end());
  // Anchors (the prompt's end, the request's points) are what a next turn or a shared system
  // prompt resumes from: the cache keeps their copies before interval ones.
  const auto is_anchor = [=](int64_t pos) {
    return pos > 0 && (pos == last || std::binary_search(marks.begin(), marks.end(), pos));
  };
  const auto is_point = [=](int64_t pos) { return is_anchor(pos) || (pos > 0 && every > 0 && pos % every == 0); };
  // Positions are the slot's; the loop counts the tokens of the prompt after the cached ones.
  h.chunk_end = [=](int64_t done) {
    const int64_t pos = cached + done;
    int64_t next = every > 0 ? (pos / every + 1) * every : INT64_MAX;
    if (last > pos) next = std::min(next, last);
    if (const auto m = std::upper_bound(marks.begin(), marks.end(), pos); m != marks.end()) next = std::min(next, *m);
    return next == INT64_MAX ? INT64_MAX : next - cached;
  };
  h.on_prefill = [this, slot, cached, prompt, is_point, is_anchor,
                  chained = std::move(h.on_prefill)](int64_t done, int64_t total) {
    if (chained) chained(done, total);
    const int64_t pos = cached + done;
    if (!is_point(pos)) return;
    try {
      const int32_t copy =
          cache_->offer_state(slot, std::span(prompt).first(static_cast<size_t>(pos)), is_anchor(pos));
      try {
        if (copy >= 0) lm_.save_prefix_state(slot, copy);
      } catch (const std::exception&) {
        cache_->abandon_state(copy); // never resumed from: it holds no state
        throw;
      }
    } catch (const std::exception& e) { // the request goes on; only the cache misses this point
      spdlog::warn("the prefix cache kept no state at position {} of slot {}: {}", pos, slot, e.what());
    }
  };
}

int64_t Engine::max_context() const { return lm_.options().max_context; }

EngineLoad Engine::load() const {
  std::lock_guard lock(mutex_);
  EngineLoad l = kv_load_;
  l.pending = static_cast<int64_t>(pending_.size());
  l.running = running_;
  l.slots = lm_.options().max_sequences;
  return l;
}

std::shared_ptr<RequestHandle> Engine::submit(GenerationRequest r, RequestOptions ro) {
  return submit(std::move(r), std::move(ro), 1).front();
}

std::vector<std::shared_ptr<RequestHandle>> Engine::submit(GenerationRequest r, RequestOptions ro, int64_t choices) {
  if (choices < 1) throw Error(fmt::format("a request needs at least one choice (got {})", choices));
  if (r.prompt_ids.empty()) throw Error("the prompt is empty: give at least one token");
  for (int32_t id : r.prompt_ids)
    if (id < 0 || id >= lm_.vocab_size())
      throw Error(fmt::format("token id {} is outside the vocabulary (0..{})", id, lm_.vocab_size() - 1));
  const int64_t n = static_cast<int64_t>(r.prompt_ids.size());
  if (n >= max_context())
    throw PromptTooLong(fmt::format("the prompt has {} tokens but the context holds {} (the prompt and at least "
                                    "one generated token must fit): shorten the prompt",
                                    n, max_context()));
  // 0 only scores the prompt (prompt logprobs, a completion's echo).
  if (r.max_new_tokens < 0) throw Error(fmt::format("max_tokens must be >= 0 (got {})", r.max_new_tokens));
  if (!tokenizer_ && !r.stop.strings.empty()) throw Error("stop strings need a tokenizer and this model has none");
  r.sampling.validate();
  if (ro.reasoning && !tokenizer_) throw Error("splitting off the reasoning needs a tokenizer and this model has none");
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int64_t i = 0; i < choices; ++i) handles.push_back(std::make_shared<RequestHandle>());
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw QueueFull("the server is shutting down");
    const int64_t capacity = lm_.options().max_sequences + options_.max_pending;
    if (choices > capacity)
      throw TooManyChoices(fmt::format("{} choices can never be queued together: the server runs {} sequences at once "
                                       "and queues {} more (--max-concurrency, --max-pending-requests)",
                                       choices, lm_.options().max_sequences, options_.max_pending));
    if (static_cast<int64_t>(pending_.size()) + running_ + choices > capacity)
      throw QueueFull(fmt::format("all {} slots are busy and {} requests are waiting (--max-pending-requests {}): "
                                  "retry later",
                                  running_, pending_.size(), options_.max_pending));
    const auto now = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < choices; ++i) {
      GenerationRequest g = r;
      if (g.sampling.seed) g.sampling.seed = *g.sampling.seed + static_cast<uint64_t>(i);
      pending_.push_back({std::move(g), ro, handles[static_cast<size_t>(i)], now, i ? handles.front() : nullptr});
    }
  }
  cv_.notify_all();
  return handles;
}

void Engine::cancel(RequestHandle& handle) {
  handle.cancel();
  {
    std::lock_guard lock(mutex_);
    for (auto it = pending_.begin(); it != pending_.end(); ++it)
      if (it->handle.get() == &handle) {
        drop(*it, "cancelled");
        pending_.erase(it);
        break;
      }
  }
  cv_.notify_all();
}

void Engine::shutdown(bool cancel_running) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cancel_running_ = cancel_running_ || cancel_running;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

// KV blocks a request may need (docs/memory.md, "The KV block pool"): every position it can
// reach, its prompt, max_new_tokens and with speculation one round's drafts, at most max_context.
// Reserved at admission, so a running sequence never finds the pool empty mid-stream.
int64_t Engine::positions_needed(const GenerationRequest& r, int32_t slot) const {
  const ModelOptions& o = lm_.options();
  const int64_t prompt_end = (r.append ? lm_.position(slot) : 0) + static_cast<int64_t>(r.prompt_ids.size());
  const int64_t round = o.speculation.on() ? o.speculation.draft_tokens + 1 : 0;
  return std::min(prompt_end + r.max_new_tokens + round, o.max_context);
}

// Whether `slot` can hold `need` positions once it keeps only its first `keep` and the free slots
// other than it give back the rows they keep for prompt reuse, and the prefix cache the blocks
// then held by it alone (exact with shared blocks: a block returns to the pool only when no slot
// keeps it and the cache lets it go).
bool Engine::blocks_suffice(int32_t slot, int64_t keep, int64_t need, std::span<const int32_t> free_slots) const {
  return lm_.kv_outlook(slot, keep, need, free_slots).fits();
}

// Gives `slot` the blocks of `need` positions, taking back the rows other free slots keep for
// prompt reuse, least recently retired first, while the free blocks fall short (their full
// blocks stay in the prefix cache), then the prefix cache's least recently used blocks.
bool Engine::reserve_blocks(int32_t slot, int64_t need, std::span<const int32_t> free_slots) {
  lm_.trim_kv(slot);
  const auto short_of = [&] {
    const CausalLM::KvOutlook o = lm_.kv_outlook(slot, lm_.position(slot), need);
    return o.take - o.free;
  };
  for (int32_t s : free_slots) {
    if (short_of() <= 0) break;
    if (s == slot || lm_.kv_blocks_held(s) == 0) continue;
    lm_.release_kv(s);
    reuse_.forget(s);
  }
  while (cache_ && short_of() > 0)
    if (!cache_->evict_one()) break;
  return lm_.reserve_kv(slot, need);
}

// Room for `blocks` more free blocks, to bring a match's blocks back from the host tier: the rows
// free slots other than `slot` keep, then the cache's least recently used blocks (spilled in turn).
// Whether the free blocks grew.
bool Engine::make_room(int64_t blocks, int32_t slot, std::span<const int32_t> free_slots) {
  const int64_t before = lm_.kv_blocks_free(), want = before + blocks;
  for (int32_t s : free_slots) {
    if (lm_.kv_blocks_free() >= want) break;
    if (s == slot || lm_.kv_blocks_held(s) == 0) continue;
    lm_.release_kv(s);
    reuse_.forget(s);
  }
  while (lm_.kv_blocks_free() < want && cache_->evict_one()) {
  }
  return lm_.kv_blocks_free() > before;
}

Sequence* Engine::fork_source(const Pending& p, Scheduler& loop, std::vector<std::unique_ptr<Sequence>>& active) const {
  if (!p.first_choice || p.request.prompt_logprobs > 0 || p.request.append) return nullptr;
  for (const auto& s : active)
    if (&s->handle() == p.first_choice.get())
      return !s->done() && loop.reading_prompt(s->slot()) ? s.get() : nullptr;
  return nullptr;
}

void Engine::admit(Scheduler& loop, std::vector<std::unique_ptr<Sequence>>& active, std::vector<int32_t>& free_slots) {
  std::lock_guard lock(mutex_);
  while (!pending_.empty() && !free_slots.empty()) {
    Pending& p = pending_.front();
    if (p.handle->cancelled()) {
      drop(p, "cancelled");
      pending_.pop_front();
      continue;
    }
    // A further choice of a request whose choice 0 still reads the prompt copies it there, in
    // the least recently used free slot: its admission counts blocks as if it read the prompt
    // (the fork gives back those the shared ones replace).
    Sequence* source = fork_source(p, loop, active);
    const SlotReuse::Choice choice =
        reuse_.choose(source ? std::span<const int32_t>{} : std::span<const int32_t>(p.request.prompt_ids), free_slots);
    const int32_t slot = choice.slot;
    // Prompt logprobs need every prompt position's logits: such a prompt is read whole.
    int64_t reuse = p.request.prompt_logprobs > 0 || p.request.append ? 0 : choice.reuse;
    if (reuse > lm_.position(slot) || (choice.restore && lm_.snapshot_position(slot) != reuse)) reuse = 0;
    // The prefix cache's blocks, where they cover more of the prompt than the slot's own tokens.
    PrefixCache::Match hit;
    std::vector<int32_t>& shared = hit.blocks;
    if (cache_ && !source && p.request.prompt_logprobs == 0 && !p.request.append) {
      const auto& prompt = p.request.prompt_ids;
      hit = cache_->match(prompt, static_cast<int64_t>(prompt.size()) - 1);
      if (hit.missing > 0 && make_room(hit.missing, slot, free_slots))
        hit = cache_->match(prompt, static_cast<int64_t>(prompt.size()) - 1);
      if (static_cast<int64_t>(shared.size()) * lm_.kv_block_tokens() <= reuse) shared.clear();
    }
    if (!shared.empty()) reuse = static_cast<int64_t>(shared.size()) * lm_.kv_block_tokens();
    const int64_t need = positions_needed(p.request, slot);
    const int64_t keep = reuse > 0 ? reuse : p.request.append ? lm_.position(slot) : 0;
    // Not enough blocks until running sequences end: the queue waits, in order.
    if (shared.empty() ? !blocks_suffice(slot, keep, need, free_slots)
                       : !lm_.kv_outlook(slot, keep, need, free_slots, shared).fits())
      break;
    Pending taken = std::move(p);
    pending_.pop_front();
    GenerationRequest run = taken.request;
    if (!shared.empty()) {
      lm_.adopt_prefix(slot, shared, hit.state);
      reuse_.forget(slot);
      run.prompt_ids.erase(run.prompt_ids.begin(), run.prompt_ids.begin() + reuse);
      run.append = true; // the slot holds the shared blocks' tokens
    } else if (reuse > 0) {
      if (choice.restore) lm_.restore_snapshot(slot);
      else if (lm_.position(slot) > reuse) lm_.truncate(slot, reuse);
      run.prompt_ids.erase(run.prompt_ids.begin(), run.prompt_ids.begin() + reuse);
      run.append = true; // the slot keeps its first `reuse` tokens
    } else if (!run.append) {
      lm_.release_kv(slot); // its rows are not read again
    }
    auto seq = std::make_unique<Sequence>(slot, taken.request, taken.options, taken.handle, tokenizer_,
                                          taken.submitted, reuse);
    try {
      if (!reserve_blocks(slot, need, free_slots))
        throw Error(fmt::format("internal: {} KV blocks for {} positions were counted free but could not be taken",
                                lm_.kv_blocks_for(need), need));
      SequenceHooks hooks = seq->hooks();
      if (cache_ && lm_.prefix_states() > 0 && !source && !taken.request.append)
        add_state_points(hooks, slot, reuse, taken.request);
      if (source) loop.add_fork(source->slot(), slot, std::move(run), std::move(hooks));
      else loop.add(slot, std::move(run), std::move(hooks)); // resets the slot unless it continues it
    } catch (const std::exception& e) {
      reuse_.forget(slot);
      lm_.release_kv(slot);
      drop(taken, "error", e.what());
      continue;
    }
    free_slots.erase(std::find(free_slots.begin(), free_slots.end(), slot));
    ++running_;
    active.push_back(std::move(seq));
  }
}

void Engine::drop(Pending& p, const std::string& reason, const std::string& error) {
  ServeResult r;
  r.finish_reason = reason;
  r.error = error;
  r.prompt_tokens = static_cast<int64_t>(p.request.prompt_ids.size());
  r.user = p.options.user;
  r.timings.queue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.submitted).count();
  r.timings.submitted_at = unix_time(p.submitted);
  p.handle->finish(r);
  if (options_.on_finish) options_.on_finish(r);
}

void Engine::expire_pending() {
  const bool timeout = options_.pending_timeout.count() > 0;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    // A client that went away while waiting gives its place in the queue back at once.
    if (it->handle->cancelled()) {
      drop(*it, "cancelled");
      it = pending_.erase(it);
    } else if (timeout && now - it->submitted > options_.pending_timeout) {
      drop(*it, "timeout");
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void Engine::retire(Sequence& s, std::vector<int32_t>& free_slots) {
  if (s.result().finish_reason == "error") {
    reuse_.forget(s.slot());
  } else {
    std::vector<int32_t> fed = s.fed_tokens();
    const int64_t position = lm_.position(s.slot());
    // The slot holds the first `position` tokens; those past the known ones (a pick nobody read)
    // are not offered.
    if (cache_) cache_->offer(s.slot(), std::span(fed).first(std::min(fed.size(), static_cast<size_t>(position))));
    reuse_.ended(s.slot(), std::move(fed), position, lm_.snapshot_position(s.slot()));
  }
  free_slots.push_back(s.slot());
  --running_;
  s.handle().finish(s.result());
  if (options_.on_finish) options_.on_finish(s.result());
}

SchedulerStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::run() {
  Scheduler loop(lm_);
  std::vector<int32_t> free_slots;
  for (int32_t s = lm_.options().max_sequences - 1; s >= 0; --s) free_slots.push_back(s);
  std::vector<std::unique_ptr<Sequence>> active;
  // Finished sequences free their slot before the next iteration.
  auto retire_done = [&] {
    for (auto it = active.begin(); it != active.end();) {
      if ((*it)->done()) {
        retire(**it, free_slots);
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  };
  while (true) {
    {
      std::unique_lock lock(mutex_);
      const auto ready = [&] { return stopping_ || !active.empty() || (!pending_.empty() && !free_slots.empty()); };
      // With a queue timeout, wake up now and then to expire waiting requests.
      if (options_.pending_timeout.count() > 0)
        cv_.wait_for(lock, options_.pending_timeout / 4 + std::chrono::milliseconds(1), ready);
      else
        cv_.wait(lock, ready);
      expire_pending();
      if (stopping_) {
        // Queued requests never started: cancel them. Running ones finish unless told otherwise.
        for (Pending& p : pending_) drop(p, "cancelled");
        pending_.clear();
        if (cancel_running_) {
          loop.end_all("cancelled");
          retire_done();
        }
        if (active.empty()) break;
      }
    }
    admit(loop, active, free_slots);
    try {
      loop.step();
    } catch (const std::exception& e) { // a failure outside any one sequence: nothing can go on
      spdlog::error("the engine loop failed: {}", e.what());
      loop.end_all("error");
    }
    std::lock_guard lock(mutex_);
    retire_done();
    stats_ = loop.stats();
    count_blocks();
  }
}

} // namespace ninfer::serving
