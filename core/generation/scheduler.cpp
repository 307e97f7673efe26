#include "ninfer/generation/scheduler.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ninfer/models/causal_lm.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

using Clock = std::chrono::steady_clock;

// Sampling the backend's pick lacks: penalties need the token history, top logprobs the whole
// distribution, a logit bias its table. Such a sequence brings its logits row back and samples
// on the host.
bool backend_can_pick(const SamplingParams& p) {
  return p.repetition_penalty == 1.0 && p.presence_penalty == 0.0 && p.frequency_penalty == 0.0 &&
         p.top_logprobs == 0 && p.logit_bias.empty();
}

// ", of which linear 5.10 ms, attention 2.31 ms, ...": the ops that took the most host time,
// largest first (the rest of a step's host time is its inputs' upload and the pick).
std::string slowest_ops(const std::map<std::string, double, std::less<>>& op_ms) {
  std::vector<std::pair<double, std::string_view>> by_time;
  for (const auto& [op, ms] : op_ms) by_time.emplace_back(ms, op);
  std::sort(by_time.begin(), by_time.end(), std::greater<>());
  std::string out;
  for (size_t i = 0; i < by_time.size() && i < 5; ++i)
    out += fmt::format("{} {} {:.2f} ms", i ? "," : ", of which", by_time[i].second, by_time[i].first);
  return out;
}

} // namespace

struct Scheduler::Sequence {
  Sequence(int32_t s, GenerationRequest r, SequenceHooks h)
      : slot(s), request(std::move(r)), hooks(std::move(h)), sampler(request.sampling, request.prompt_ids),
        on_backend(backend_can_pick(request.sampling)) {
    out.seed = sampler.seed();
    out.added = Clock::now();
  }
  int64_t prompt_size() const { return static_cast<int64_t>(request.prompt_ids.size()); }
  // The thinking budget's token count less the tokens read and being picked: 0 when the row
  // queued next picks the token the end token replaces, negative while that row is in flight.
  // Empty when no budget applies (none asked, or the block is closed).
  std::optional<int64_t> thinking_left() const {
    if (!request.thinking_budget || thought) return std::nullopt;
    return request.thinking_budget->tokens - read - in_flight;
  }
  // Whether the next token read is the one the thinking budget replaces with its end token.
  bool forced_next() const { return request.thinking_budget && !thought && read == request.thinking_budget->tokens; }
  bool prefilling() const { return queued_prompt < prompt_size(); }
  // Takes tokens and joins steps: neither waiting to copy another's prompt nor for the first
  // token drawn from that prompt's logits.
  bool forked_ready() const { return fork == Fork::None; }
  // The row's pick: on the backend with the next draw of this sequence's stream (draws are
  // claimed in step order, as the host sampler would make them), or a logits row for the host.
  void fill_pick(StepRow& row) {
    if (!on_backend) {
      row.logits = true; // the backend's own pick (greedy) is not used
      return;
    }
    const SamplingParams& p = request.sampling;
    if (p.is_greedy()) return;
    row.sampling = row_sampling(p, sampler.seed(), sampler.claim_draw());
  }

  int32_t slot;
  GenerationRequest request;
  SequenceHooks hooks;
  Sampler sampler;
  bool on_backend;
  // Speculation: picked on the backend (greedy or sampled), so its tokens come from rounds once
  // its prompt is in.
  bool spec = false;
  bool round_unread = false;   // a round of it is queued and not read
  bool next_on_backend = false; // its next input is its last step's or round's pick, on the backend
  int64_t limit = 0;         // most tokens it may generate (max_new_tokens, capped by the context)
  int64_t queued_prompt = 0; // prompt tokens queued
  int64_t read = 0;          // tokens read (the stop token included)
  int64_t in_flight = 0;     // queued rows whose picks are not read: each adds one token
  std::optional<int32_t> last; // the last token read: the next input when nothing is in flight
  bool thought = false;        // the thinking budget's end token was read: the budget is spent
  bool ended = false;
  int64_t prompt_end = 0;      // the slot's position once the prompt is in
  // add_fork: waiting for the prompt of the sequence it copies, then for its first token.
  enum class Fork { None, AwaitingPrompt, AwaitingFirst } fork = Fork::None;
  std::vector<std::shared_ptr<Sequence>> forks; // sequences waiting to copy this one's prompt
  SequenceOutcome out;
};

Scheduler::Scheduler(CausalLM& lm) : lm_(lm) {
  if (lm_.unread_results())
    throw Error(fmt::format("the model has {} step results unread: another loop is using it", lm_.unread_results()));
}

// Dropped, not waited for: a finished generate() returns without waiting for the step queued
// behind its last token.
Scheduler::~Scheduler() { lm_.drop_results(); }

std::shared_ptr<Scheduler::Sequence> Scheduler::make_sequence(int32_t slot, GenerationRequest& r,
                                                              SequenceHooks& hooks) const {
  const int32_t slots = lm_.options().max_sequences;
  if (slot < 0 || slot >= slots)
    throw Error(fmt::format("sequence slot {} does not exist (slots 0..{})", slot, slots - 1));
  for (const SequencePtr& s : running_)
    if (s->slot == slot && !s->ended) throw Error(fmt::format("slot {} already holds a running sequence", slot));
  if (r.prompt_ids.empty()) throw Error("the prompt is empty: give at least one token");
  for (size_t i = 0; i < r.prompt_ids.size(); ++i)
    if (r.prompt_ids[i] < 0 || r.prompt_ids[i] >= lm_.vocab_size())
      throw Error(fmt::format("token id {} (at index {}) is outside the model's vocabulary [0, {}); the tokenizer "
                              "does not match this model",
                              r.prompt_ids[i], i, lm_.vocab_size()));
  if (r.max_new_tokens < 0) throw Error(fmt::format("max_new_tokens must be >= 0 (got {})", r.max_new_tokens));
  if (const auto& b = r.thinking_budget; b && (b->tokens < 1 || b->end_id < 0 || b->end_id >= lm_.vocab_size()))
    throw Error(fmt::format("a thinking budget needs >= 1 tokens and an end token in the vocabulary (got {} tokens, "
                            "end token {})",
                            b->tokens, b->end_id));
  const int64_t ctx = lm_.options().max_context;
  const int64_t prompt_end = (r.append ? lm_.position(slot) : 0) + static_cast<int64_t>(r.prompt_ids.size());
  if (prompt_end >= ctx)
    throw Error(fmt::format("the prompt ends at token {} but the context holds {} (the prompt and at least one "
                            "generated token must fit)",
                            prompt_end, ctx));
  auto s = std::make_shared<Sequence>(slot, std::move(r), std::move(hooks)); // the sampler validates
  s->spec = lm_.options().speculation.on() && s->on_backend;
  // A sequence ends when the next step would need a position the context lacks.
  s->limit = std::min(s->request.max_new_tokens, ctx - prompt_end);
  s->prompt_end = prompt_end;
  return s;
}

void Scheduler::add(int32_t slot, GenerationRequest r, SequenceHooks hooks) {
  SequencePtr s = make_sequence(slot, r, hooks);
  if (!s->request.append) lm_.reset(slot);
  running_.push_back(std::move(s));
}

bool Scheduler::reading_prompt(int32_t slot) const {
  return std::any_of(running_.begin(), running_.end(), [&](const SequencePtr& s) {
    return s->slot == slot && !s->ended && s->forked_ready() && s->prefilling();
  });
}

void Scheduler::add_fork(int32_t from, int32_t slot, GenerationRequest r, SequenceHooks hooks) {
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const SequencePtr& s) {
    return s->slot == from && !s->ended && s->forked_ready() && s->prefilling();
  });
  if (it == running_.end())
    throw Error(fmt::format("slot {} holds no sequence still reading its prompt: there is no prompt to copy", from));
  if (r.append || r.prompt_logprobs > 0)
    throw Error("a sequence copied from another's prompt continues no earlier sequence and reads no prompt rows "
                "(append, prompt logprobs)");
  SequencePtr s = make_sequence(slot, r, hooks);
  if (s->prompt_end != (*it)->prompt_end)
    throw Error(fmt::format("the sequence in slot {} ends its prompt at position {}, not at this prompt's {} tokens",
                            from, (*it)->prompt_end, s->prompt_end));
  lm_.reset(slot); // what it starts from if it reads its prompt after all
  s->fork = Sequence::Fork::AwaitingPrompt;
  (*it)->forks.push_back(s);
  running_.push_back(std::move(s));
}

void Scheduler::end(Sequence& s, const std::string& reason, const std::string& error) {
  if (s.ended) return;
  s.ended = true;
  // Sequences still waiting to copy its prompt read theirs.
  for (const SequencePtr& f : s.forks) f->fork = Sequence::Fork::None;
  s.forks.clear();
  s.out.finish_reason = reason;
  s.out.error = error;
  s.out.ended = Clock::now();
  if (s.hooks.on_end) s.hooks.on_end(s.out);
}

void Scheduler::end_all(const std::string& reason) {
  for (const SequencePtr& s : running_) end(*s, reason);
  running_.clear();
}

void Scheduler::step() {
  ++iteration_;
  // The last round first: its rows' positions are known once it is read (and a sequence
  // cancelled now leaves no round behind).
  read_rounds();
  for (const SequencePtr& s : running_)
    if (!s->ended && s->hooks.cancelled && s->hooks.cancelled()) end(*s, "cancelled");
  rounds_open_ = rounds_open();
  queue_iteration();
  queue_round();
  // The step just queued keeps the device busy while the host reads the ones before it; with
  // nothing queued (every sequence waits for the host), everything is read.
  const bool queued = !in_flight_.empty() && in_flight_.back().iteration == iteration_;
  while (!in_flight_.empty() && (!queued || in_flight_.front().iteration < iteration_)) read_oldest();
  std::erase_if(running_, [](const SequencePtr& s) { return s->ended; });
}

struct Scheduler::StepBuild {
  std::vector<StepRow> rows;
  InFlight f;               // the rows' sequences, as read_oldest takes them
  std::vector<int32_t> ids; // the host ids the rows point at, alive until the step is queued
  int64_t decode_rows = 0;
};

struct Scheduler::Chunk {
  SequencePtr s;
  int64_t n = 0;
  bool last = false; // it ends the prompt
};

// The oldest prompt first, so prompts are read in arrival order. While another sequence
// decodes, the chunk is mixed_chunk tokens: it shares that sequence's step, and the step's time
// is that sequence's inter-token latency. With nobody decoding, prefill_chunk tokens (the
// prompt alone is read fastest in long chunks).
std::optional<Scheduler::Chunk> Scheduler::next_chunk() const {
  const auto it = std::find_if(running_.begin(), running_.end(), [](const SequencePtr& s) {
    return !s->ended && s->forked_ready() && s->prefilling();
  });
  if (it == running_.end()) return std::nullopt;
  const bool others_decode = std::any_of(running_.begin(), running_.end(), [](const SequencePtr& s) {
    return !s->ended && s->forked_ready() && !s->prefilling() && s->read + s->in_flight < s->limit;
  });
  const ModelOptions& o = lm_.options();
  Sequence& s = **it;
  int64_t n = std::min<int64_t>(others_decode ? o.mixed_chunk : o.prefill_chunk, s.prompt_size() - s.queued_prompt);
  if (s.hooks.chunk_end) n = std::clamp<int64_t>(s.hooks.chunk_end(s.queued_prompt) - s.queued_prompt, 1, n);
  return Chunk{*it, n, s.queued_prompt + n == s.prompt_size()};
}

// One forward pass per iteration. A chunk leads the step (CausalLM::queue_step: the chunk is
// the first row), so its last token and the one-token rows are the step's picked rows.
void Scheduler::queue_iteration() {
  // Room for this step's result first: reading may end sequences, so it comes before the rows.
  read_until(CausalLM::kMostUnreadResults - 1);
  const std::optional<Chunk> chunk = next_chunk();
  StepBuild b;
  b.f.iteration = iteration_;
  if (chunk) {
    Sequence& s = *chunk->s;
    const std::span<const int32_t> ids(s.request.prompt_ids.data() + s.queued_prompt, static_cast<size_t>(chunk->n));
    // Prompt logprobs sample the first token on the host from the chunk's logits rows. The
    // sequences waiting to copy the prompt draw theirs from the last row's logits.
    const bool forks = chunk->last && s.request.prompt_logprobs == 0 &&
                       std::any_of(s.forks.begin(), s.forks.end(), [](const SequencePtr& f) { return !f->ended; });
    StepRow row{.slot = s.slot, .ids = ids,
                .pick = chunk->last && (s.limit > 0 || forks) && s.request.prompt_logprobs == 0};
    if (row.pick) s.fill_pick(row);
    if (forks) row.logits = true;
    b.rows.push_back(row);
    b.f.rows.push_back(row.pick ? chunk->s : nullptr);
    b.f.logits.push_back(row.logits);
  }
  add_decode_rows(b);
  if (b.rows.empty()) return;
  const bool timed = chunk && spdlog::should_log(spdlog::level::debug); // the log line below
  const Clock::time_point queue_start = timed ? Clock::now() : Clock::time_point{};
  std::map<std::string, double, std::less<>> op_ms; // host time by op, while timed
  if (timed) lm_.set_host_tally(&op_ms);
  try {
    lm_.queue_step(b.rows);
  } catch (const std::exception& e) {
    lm_.set_host_tally(nullptr);
    if (chunk) end(*chunk->s, "error", e.what());
    for (const SequencePtr& s : b.f.rows)
      if (s) end(*s, "error", e.what());
    return;
  }
  // A prompt chunk's step is queued eagerly the first time its shape is met (planning, library
  // heuristics) and often after: its host time is where a short prompt's latency can hide.
  if (timed) {
    lm_.set_host_tally(nullptr);
    spdlog::debug("prompt chunk of {} tokens (slot {}, from position {}) beside {} decode rows: {:.2f} ms to queue{}",
                  chunk->n, chunk->s->slot, lm_.position(chunk->s->slot) - chunk->n, b.decode_rows,
                  std::chrono::duration<double, std::milli>(Clock::now() - queue_start).count(), slowest_ops(op_ms));
  }
  stats_.prompt_chunks += chunk.has_value();
  if (chunk) stats_.prompt_tokens += chunk->n;
  if (b.decode_rows > 0) {
    ++stats_.decode_steps;
    stats_.decode_rows += b.decode_rows;
    stats_.mixed_steps += chunk.has_value();
  }
  bool picked = false;
  for (size_t i = 0; i < b.rows.size(); ++i) {
    picked = picked || b.rows[i].pick;
    stats_.chained_rows += b.rows[i].ids.empty();
    stats_.logits_rows += b.rows[i].logits;
    if (b.f.rows[i]) ++b.f.rows[i]->in_flight;
  }
  // A speculating model keeps every picking step's picks as the slots' next inputs.
  if (lm_.options().speculation.on())
    for (size_t i = 0; i < b.rows.size(); ++i)
      if (b.f.rows[i]) b.f.rows[i]->next_on_backend = b.rows[i].pick && !b.rows[i].logits;
  if (picked) in_flight_.push_back(std::move(b.f));
  if (chunk) chunk_queued(*chunk);
}

// One row per sequence that can take a token now: fed by its last pick on the backend when one
// is queued (a sequence picked there), else by the last token read. A sequence sampled on the
// host waits for its logits row to be read, so while others keep the device busy it joins every
// other step.
void Scheduler::add_decode_rows(StepBuild& b) {
  b.ids.resize(running_.size());
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& s = *running_[i];
    if (s.ended || !s.forked_ready() || s.prefilling() || s.read + s.in_flight >= s.limit || in_rounds(s) ||
        s.round_unread)
      continue;
    // The pick the thinking budget replaces is in flight: the next input is the end token, fed
    // once that pick is read.
    if (const auto left = s.thinking_left(); left && *left < 0) continue;
    StepRow row{.slot = s.slot};
    if (s.in_flight == 0 && s.last) {
      b.ids[i] = *s.last;
      row.ids = std::span(&b.ids[i], 1);
    } else if (s.in_flight == 0 || !s.on_backend) {
      continue; // its next token is not known yet, not even on the backend
    }
    s.fill_pick(row);
    b.rows.push_back(row);
    b.f.rows.push_back(running_[i]);
    b.f.logits.push_back(row.logits);
    ++b.decode_rows;
  }
}

bool Scheduler::rounds_open() const {
  const int64_t cap = lm_.options().speculation.max_batch;
  if (cap <= 0) return true;
  const auto decoding = std::count_if(running_.begin(), running_.end(), [](const SequencePtr& s) {
    return s->spec && !s->ended && s->forked_ready() && !s->prefilling();
  });
  return decoding <= cap;
}

bool Scheduler::in_rounds(const Sequence& s) const {
  if (!s.spec || !rounds_open_) return false;
  const int64_t drafts = lm_.options().speculation.draft_tokens;
  // A round that could reach the thinking budget's forced token gives way to one-token steps.
  if (const auto left = s.thinking_left(); left && *left < drafts + 1) return false;
  // A round writes its input and drafts at the next drafts + 1 positions (queued steps have
  // advanced the position already; no round of the sequence is unread: read_rounds runs first).
  return lm_.position(s.slot) + drafts + 1 <= lm_.options().max_context;
}

void Scheduler::queue_round() {
  if (!lm_.options().speculation.on()) return;
  // Again after this iteration's step: a prompt it finished makes one more decoding sequence.
  rounds_open_ = rounds_open();
  std::vector<SpecRow> rows;
  InFlight f;
  f.iteration = iteration_;
  f.round = true;
  for (const SequencePtr& p : running_) {
    Sequence& s = *p;
    if (s.ended || !s.forked_ready() || s.prefilling() || s.round_unread || s.read + s.in_flight >= s.limit ||
        !in_rounds(s))
      continue;
    SpecRow row{.slot = s.slot};
    if (!s.next_on_backend) {
      if (s.in_flight || !s.last) continue; // its next input is not known yet, not even on the backend
      row.id = *s.last;
    }
    // A sampled row's picks take the sequence's next draws in order; the round uses as many as it
    // keeps tokens, claimed when it is read.
    const SamplingParams& sp = s.request.sampling;
    if (!sp.is_greedy())
      row.sampling = row_sampling(sp, s.sampler.seed(), s.sampler.draws());
    rows.push_back(row);
    f.rows.push_back(p);
    f.logits.push_back(false);
  }
  if (rows.empty()) return;
  try {
    lm_.queue_spec_round(rows);
  } catch (const std::exception& e) {
    for (const SequencePtr& s : f.rows) end(*s, "error", e.what());
    return;
  }
  ++stats_.spec_rounds;
  for (const SequencePtr& s : f.rows) {
    s->round_unread = true;
    s->next_on_backend = true;
  }
  in_flight_.push_back(std::move(f));
}

void Scheduler::read_rounds() {
  while (std::any_of(in_flight_.begin(), in_flight_.end(), [](const InFlight& f) { return f.round; })) read_oldest();
}

void Scheduler::chunk_queued(const Chunk& c) {
  Sequence& s = *c.s;
  std::vector<float> rows;
  if (s.request.prompt_logprobs > 0) {
    // Prompt logprobs need every position's logits on the host: the chunk's rows come back now
    // (waiting for its step), and the first token is sampled on the host from the last of them.
    try {
      rows = lm_.last_step_logits(0, c.n);
    } catch (const std::exception& e) {
      end(s, "error", e.what());
      return;
    }
    stats_.logits_rows += c.n;
    const auto V = static_cast<size_t>(lm_.vocab_size());
    for (int64_t i = 0; i < c.n; ++i) {
      const std::span<const float> row(rows.data() + static_cast<size_t>(i) * V, V);
      const double lse = log_sum_exp(row);
      s.out.prompt_top.push_back(top_logprobs(row, lse, s.request.prompt_logprobs));
      // The row after prompt position `at` scores the prompt's own next token, if there is one.
      const int64_t at = s.queued_prompt + i;
      if (at + 1 < s.prompt_size())
        s.out.prompt_logprobs.push_back(static_cast<float>(
            static_cast<double>(row[static_cast<size_t>(s.request.prompt_ids[static_cast<size_t>(at + 1)])]) - lse));
    }
  }
  s.queued_prompt += c.n;
  // The state at the prompt's end, for a later prompt that shares the prompt but not the reply
  // (serving's prompt reuse): queued before the step that feeds the first pick.
  if (c.last && lm_.options().state_snapshots) lm_.save_snapshot(s.slot);
  if (c.last && s.request.prompt_logprobs > 0 && s.hooks.on_prompt_scored) s.hooks.on_prompt_scored(s.out);
  if (c.last) fork_waiting(s, rows);
  if (s.hooks.on_prefill) s.hooks.on_prefill(s.queued_prompt, s.prompt_size());
  if (c.last && s.limit == 0) end(s, "length");
  else if (c.last && !rows.empty())
    take_token(s, -1, 0, rows.data() + static_cast<size_t>(c.n - 1) * static_cast<size_t>(lm_.vocab_size()));
}

void Scheduler::fork_waiting(Sequence& s, const std::vector<float>& rows) {
  std::vector<SequencePtr> forks = std::move(s.forks);
  s.forks.clear();
  for (const SequencePtr& p : forks) {
    Sequence& f = *p;
    if (f.ended) continue;
    f.fork = Sequence::Fork::None;
    try {
      lm_.fork(s.slot, f.slot);
    } catch (const std::exception&) {
      continue; // it reads its prompt itself (its slot is as add_fork left it)
    }
    ++stats_.forks;
    f.queued_prompt = f.prompt_size();
    f.out.forked_tokens = f.prompt_size();
    if (f.hooks.on_prefill) f.hooks.on_prefill(f.queued_prompt, f.prompt_size());
    if (f.limit == 0) {
      end(f, "length");
    } else if (!rows.empty()) {
      const size_t V = static_cast<size_t>(lm_.vocab_size());
      take_token(f, -1, 0, rows.data() + rows.size() - V);
    } else {
      // The chunk's step (the newest in flight: it picked) brings back its last row's logits.
      f.fork = Sequence::Fork::AwaitingFirst;
      in_flight_.back().forks.push_back(p);
    }
  }
}

void Scheduler::read_until(size_t keep) {
  while (in_flight_.size() > keep) read_oldest();
}

void Scheduler::read_oldest() {
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  StepResult r;
  try {
    r = lm_.next_result();
  } catch (const std::exception& e) {
    for (const SequencePtr& s : f.rows) {
      if (!s) continue;
      if (f.round) s->round_unread = false;
      else --s->in_flight;
      end(*s, "error", e.what());
    }
    for (const SequencePtr& s : f.forks) end(*s, "error", e.what());
    return;
  }
  if (f.round) {
    // Per row: its accepted drafts and the model's own next token, as far as the sequence
    // takes them (a stop token or its length may end it inside the round).
    const size_t D = r.ids.size() / f.rows.size();
    const auto drafts = static_cast<int32_t>(D - 1);
    for (size_t i = 0; i < f.rows.size(); ++i) {
      Sequence& s = *f.rows[i];
      s.round_unread = false;
      stats_.spec.add(r.accepted[i], drafts);
      s.out.spec.add(r.accepted[i], drafts);
      if (!s.request.sampling.is_greedy())
        for (int32_t j = 0; j <= r.accepted[i]; ++j) s.sampler.claim_draw();
      for (int32_t j = 0; j <= r.accepted[i] && !s.ended; ++j)
        take_token(s, r.ids[i * D + static_cast<size_t>(j)], r.logprobs[i * D + static_cast<size_t>(j)], nullptr);
    }
    return;
  }
  const auto V = static_cast<size_t>(lm_.vocab_size());
  size_t logits_at = 0;
  for (size_t i = 0; i < f.rows.size(); ++i) {
    if (!f.rows[i]) continue; // a chunk's pick nobody reads
    Sequence& s = *f.rows[i];
    --s.in_flight;
    const float* logits = f.logits[i] ? r.logits.data() + V * logits_at++ : nullptr;
    // A step queued before its sequence ended still ran; what it picked is not wanted. A
    // sequence picked on the backend takes the pick (its logits row came back for its forks).
    if (!s.ended) take_token(s, r.ids[i], r.logprobs[i], s.on_backend ? nullptr : logits);
  }
  // The forks of row 0's prompt draw their first tokens from its logits, each with its sampler.
  for (const SequencePtr& p : f.forks) {
    p->fork = Sequence::Fork::None;
    if (!p->ended) take_token(*p, -1, 0, r.logits.data());
  }
}

void Scheduler::take_token(Sequence& s, int32_t id, float logprob, const float* logits) {
  SampleResult t;
  try {
    if (s.forced_next()) {
      // The thinking budget is spent: the end token replaces the pick, and is the next input
      // (not the pick on the backend).
      t = SampleResult{s.request.thinking_budget->end_id, 0.0f, {}};
      s.next_on_backend = false;
      // The replaced pick took its draw, as a device pick claims one when queued.
      if (logits && !s.request.sampling.is_greedy()) s.sampler.claim_draw();
    } else if (logits) {
      const auto t0 = Clock::now();
      t = s.sampler.sample(std::span(logits, static_cast<size_t>(lm_.vocab_size())));
      s.out.sampling_s += std::chrono::duration<double>(Clock::now() - t0).count();
    } else {
      if (id < 0) throw Error("the model produced NaN (or +inf) logits; rerun with NINFER_SYNC_OPS=1 to find the op");
      t = SampleResult{id, logprob, {}};
    }
    s.sampler.accept(t.token);
  } catch (const std::exception& e) {
    end(s, "error", e.what());
    return;
  }
  if (s.out.first_token == Clock::time_point{}) s.out.first_token = Clock::now();
  ++s.read;
  s.last = t.token;
  if (s.request.thinking_budget && t.token == s.request.thinking_budget->end_id) s.thought = true;
  if (s.request.stop.is_stop_token(t.token)) {
    s.out.stop_token = t.token;
    end(s, "stop");
    return;
  }
  s.out.generated_ids.push_back(t.token);
  s.out.generated_logprobs.push_back(t.logprob);
  if (s.request.sampling.top_logprobs > 0) s.out.generated_top.push_back(t.top_logprobs);
  bool stopped = false;
  try {
    stopped = s.hooks.on_token && s.hooks.on_token(t);
  } catch (const std::exception& e) {
    end(s, "error", e.what());
    return;
  }
  if (stopped) end(s, "stop");
  else if (s.read >= s.limit) end(s, "length");
}

} // namespace ninfer
