#include "ninfer/generation/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>

#include "ninfer/support/error.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/sampling/sampler.hpp"
#include "ninfer/tokenizer/stream_decoder.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// The K most likely next tokens after each prompt prefix, from all-position logits.
std::vector<std::vector<TokenLogprob>> prompt_top(std::span<const float> all, int64_t rows, int64_t vocab, int64_t k) {
  std::vector<std::vector<TokenLogprob>> out;
  out.reserve(rows);
  for (int64_t i = 0; i < rows; ++i) {
    std::span<const float> row = all.subspan(i * vocab, vocab);
    out.push_back(top_logprobs(row, log_sum_exp(row), k));
  }
  return out;
}

} // namespace

GenerationResult generate(CausalLM& lm, int32_t slot, const Tokenizer* tokenizer, const GenerationRequest& request,
                          const TextSink& on_text, const PrefillProgress& on_prefill) {
  check_request(lm, slot, tokenizer, request);
  const int64_t vocab = lm.vocab_size();
  GenerationResult res;
  Sampler sampler(request.sampling, request.prompt_ids);
  res.seed = sampler.seed();
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

  auto cancelled = [&] { return request.cancel && request.cancel->load(); };
  const auto start = Clock::now();
  if (!request.append) lm.reset(slot);
  // The prompt goes in the model's own chunks (prefill appends), so progress can be reported
  // and a cancel honoured between them; the results are those of one prefill call.
  std::vector<float> logits;
  const std::span<const int32_t> prompt(request.prompt_ids);
  const size_t chunk = static_cast<size_t>(lm.options().prefill_chunk);
  const LogitsFor rows = request.prompt_logprobs > 0 ? LogitsFor::All : LogitsFor::Last;
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    if (cancelled()) {
      res.finish_reason = "cancelled";
      res.timings.prefill_s = seconds_since(start);
      return res;
    }
    const std::span<const int32_t> part = prompt.subspan(at, std::min(chunk, prompt.size() - at));
    std::vector<float> out = lm.prefill(slot, part, rows);
    if (rows == LogitsFor::All) {
      std::vector<std::vector<TokenLogprob>> top =
          prompt_top(out, static_cast<int64_t>(part.size()), vocab, request.prompt_logprobs);
      res.prompt_top.insert(res.prompt_top.end(), top.begin(), top.end());
    }
    logits.assign(out.end() - vocab, out.end());
    if (on_prefill) on_prefill(static_cast<int64_t>(at + part.size()), static_cast<int64_t>(prompt.size()));
  }
  res.timings.prefill_s = seconds_since(start);

  // Without penalties and logprob lists, tokens are picked on the backend (argmax, or the
  // sample op with the sampler's draw numbers): only ids cross to the host. Anything that needs
  // the whole distribution on the host (penalties, top logprobs) samples there. Both apply the
  // same filters to the same random draws, so the choice is the same (docs/sampling.md).
  const SamplingParams& sp = request.sampling;
  const bool device_pick = sp.repetition_penalty == 1.0 && sp.presence_penalty == 0.0 &&
                           sp.frequency_penalty == 0.0 && sp.top_logprobs == 0;
  SampleResult next{};
  Clock::time_point decode_start;
  res.finish_reason = "length";
  const int32_t slots[1] = {slot};
  // On the device path the step that picks token k+2 is queued before token k+1 is read (its
  // input is token k+1, still on the device), so the device does not idle while the host reads,
  // checks and prints a token. When a token ends the generation, the step queued behind it is
  // dropped; the slot is reset at the next request.
  struct DropQueued {
    CausalLM& lm;
    ~DropQueued() { lm.drop_queued(); }
  } drop_queued{lm};
  auto queue_step = [&](std::span<const int32_t> ids) { // the step after the last queued one
    if (sp.is_greedy()) return lm.queue_decode(slots, ids);
    const RowSampling rs{sp.temperature, static_cast<int32_t>(std::min<int64_t>(sp.top_k, INT32_MAX)), sp.top_p,
                         sp.min_p, sampler.seed(), sampler.claim_draw()};
    lm.queue_decode(slots, ids, std::span(&rs, 1));
  };
  for (int64_t step = 0; step < request.max_new_tokens; ++step) {
    if (cancelled()) {
      res.finish_reason = "cancelled";
      break;
    }
    if (step > 0 && device_pick) { // waits for the step (decode time, not sampling time)
      std::vector<float> lp;
      const std::vector<int32_t> chosen = lm.next_picks(&lp);
      next = SampleResult{chosen[0], lp[0], {}};
      if (next.token < 0)
        throw Error("the model produced NaN (or +inf) logits; rerun with NINFER_SYNC_OPS=1 to find the op");
    }
    const auto t_sample = Clock::now();
    if (step == 0 || !device_pick) next = sampler.sample(logits);
    sampler.accept(next.token);
    res.timings.sampling_s += seconds_since(t_sample);
    const SampleResult& s = next;
    if (step == 0) res.timings.first_token_s = seconds_since(start);
    if (request.stop.is_stop_token(s.token)) {
      res.finish_reason = "stop";
      res.stop_token = s.token;
      break;
    }
    res.generated_ids.push_back(s.token);
    res.generated_logprobs.push_back(s.logprob);
    if (sp.top_logprobs > 0) res.generated_top.push_back(s.top_logprobs);
    if (decoder) {
      const StopMatcher::Step m = matcher.feed(decoder->push(s.token));
      emit(m.emit);
      if (m.stopped) {
        res.finish_reason = "stop";
        res.stop_string = m.match;
        break;
      }
    }
    if (step + 1 == request.max_new_tokens) break; // the last token needs no forward pass
    if (step == 0) decode_start = Clock::now();
    const int32_t ids[1] = {s.token};
    if (!device_pick) {
      logits = lm.decode(slots, ids);
      continue;
    }
    if (step == 0) queue_step(ids);                    // picks token 1 from token 0
    if (step + 2 < request.max_new_tokens) queue_step({}); // picks token step + 2 from token step + 1
  }
  if (decode_start != Clock::time_point{}) res.timings.decode_s = seconds_since(decode_start);
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
