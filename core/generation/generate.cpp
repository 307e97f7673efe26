#include "ninfer/generation/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>

#include "ninfer/generation/scheduler.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/sampling/sampler.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/stream_decoder.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer {
namespace {

void check_request(const CausalLM& lm, int32_t slot, const Tokenizer* tokenizer, const GenerationRequest& r) {
  if (r.prompt_ids.empty()) throw Error("the prompt is empty: give at least one token");
  if (r.max_new_tokens < 0) throw Error(fmt::format("max_new_tokens must be >= 0 (got {})", r.max_new_tokens));
  const int64_t ctx = lm.options().max_context;
  // A continued sequence keeps what its slot holds: the earlier turns count against the context.
  const int64_t prompt = static_cast<int64_t>(r.prompt_ids.size()) + (r.append ? lm.position(slot) : 0);
  const int64_t need = prompt + std::max<int64_t>(r.max_new_tokens, 1);
  if (prompt >= ctx)
    throw Error(fmt::format("the prompt has {} tokens but the context holds {}: shorten the prompt or raise "
                            "max_context (manifest runtime.max_context, --max-context)",
                            prompt, ctx));
  if (need > ctx)
    throw Error(fmt::format("the prompt ({} tokens) plus {} new tokens exceed the context of {}: lower --max-new "
                            "or raise max_context",
                            prompt, r.max_new_tokens, ctx));
  if (!tokenizer && !r.stop.strings.empty()) throw Error("stop strings need a tokenizer");
}

double seconds(SequenceOutcome::Clock::time_point from, SequenceOutcome::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

GenerationTimings timings_of(const SequenceOutcome& o) {
  GenerationTimings t;
  t.sampling_s = o.sampling_s;
  if (o.first_token == SequenceOutcome::Clock::time_point{}) {
    t.prefill_s = seconds(o.added, o.ended); // ended before a first token (cancelled)
    return t;
  }
  // The first token is read once the prompt's last chunk has run: its pick is the prefill's end.
  t.prefill_s = t.first_token_s = seconds(o.added, o.first_token);
  t.decode_s = seconds(o.first_token, o.ended);
  return t;
}

} // namespace

void SpecCounts::add(int32_t accepted, int32_t drafts) {
  if (accepted_at.size() < static_cast<size_t>(drafts)) accepted_at.resize(static_cast<size_t>(drafts), 0);
  ++rows;
  tokens += int64_t{accepted} + 1;
  for (int32_t j = 0; j < accepted; ++j) ++accepted_at[static_cast<size_t>(j)];
}

void SpecCounts::add(const SpecCounts& o) {
  if (accepted_at.size() < o.accepted_at.size()) accepted_at.resize(o.accepted_at.size(), 0);
  rows += o.rows;
  tokens += o.tokens;
  for (size_t j = 0; j < o.accepted_at.size(); ++j) accepted_at[j] += o.accepted_at[j];
}

double SpecCounts::acceptance(size_t j) const {
  return rows && j < accepted_at.size() ? static_cast<double>(accepted_at[j]) / static_cast<double>(rows) : 0.0;
}

double SpecCounts::mean_accepted_length() const {
  return rows ? static_cast<double>(tokens) / static_cast<double>(rows) : 0.0;
}

// A batch of one through the engine loop: the same steps, picks and reads as a server's
// sequence; here only the text is made.
GenerationResult generate(CausalLM& lm, int32_t slot, const Tokenizer* tokenizer, const GenerationRequest& request,
                          const TextSink& on_text, const PrefillProgress& on_prefill) {
  check_request(lm, slot, tokenizer, request);
  GenerationResult res;
  std::optional<StreamDecoder> decoder;
  // Padded vocabularies (151,936 embedding rows, 151,669 tokens) let a sampler pick an id with
  // no text; it contributes nothing rather than ending the stream.
  if (tokenizer) decoder.emplace(*tokenizer, DecodeOptions{false, true});
  StopMatcher matcher(request.stop.strings);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    res.text += text;
    if (on_text) on_text(text);
  };

  SequenceOutcome outcome;
  SequenceHooks hooks;
  hooks.on_prefill = on_prefill;
  hooks.on_token = [&](const SampleResult& s) {
    if (!decoder) return false;
    const StopMatcher::Step m = matcher.feed(decoder->push(s.token));
    emit(m.emit);
    if (m.stopped) res.stop_string = m.match;
    return m.stopped;
  };
  hooks.on_end = [&](SequenceOutcome& o) { outcome = std::move(o); };
  hooks.cancelled = [&] { return request.cancel && request.cancel->load(); };
  {
    Scheduler loop(lm);
    loop.add(slot, request, std::move(hooks));
    while (loop.busy()) loop.step();
  }
  if (outcome.finish_reason == "error") throw Error(outcome.error);
  res.generated_ids = std::move(outcome.generated_ids);
  res.generated_logprobs = std::move(outcome.generated_logprobs);
  res.generated_top = std::move(outcome.generated_top);
  res.prompt_top = std::move(outcome.prompt_top);
  res.prompt_logprobs = std::move(outcome.prompt_logprobs);
  res.finish_reason = outcome.finish_reason;
  res.stop_token = outcome.stop_token;
  res.seed = outcome.seed;
  res.timings = timings_of(outcome);
  res.spec = std::move(outcome.spec);
  if (decoder && !matcher.stopped()) {
    const StopMatcher::Step m = matcher.feed(decoder->finish());
    emit(m.emit);
    if (m.stopped) {
      res.finish_reason = "stop";
      res.stop_string = m.match;
    } else {
      emit(matcher.flush());
    }
  }
  return res;
}

} // namespace ninfer
