#include "sequence.hpp"

#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer::serving {

Sequence::Sequence(int32_t slot, GenerationRequest request, std::shared_ptr<RequestHandle> handle,
                   const Tokenizer* tokenizer, int64_t max_context, Clock::time_point submitted)
    : slot_(slot), request_(std::move(request)), handle_(std::move(handle)), max_context_(max_context),
      sampler_(request_.sampling, request_.prompt_ids), matcher_(request_.stop.strings), submitted_(submitted),
      admitted_(Clock::now()) {
  // As in generate(): ids without text (padded vocabularies) contribute nothing.
  if (tokenizer) decoder_.emplace(*tokenizer, DecodeOptions{false, true});
  result_.prompt_tokens = static_cast<int64_t>(request_.prompt_ids.size());
}

bool Sequence::on_logits(std::span<const float> row) {
  const SampleResult s = sampler_.next(row);
  if (first_token_ == Clock::time_point{}) first_token_ = Clock::now();
  if (request_.stop.is_stop_token(s.token)) {
    complete("stop");
    return true;
  }
  result_.generated_ids.push_back(s.token);
  next_input_ = s.token;
  if (decoder_) {
    StopMatcher::Step m = matcher_.feed(decoder_->push(s.token));
    result_.text += m.emit;
    handle_->push({s.token, std::move(m.emit)});
    if (m.stopped) {
      complete("stop");
      return true;
    }
  } else {
    handle_->push({s.token, {}});
  }
  const int64_t n = static_cast<int64_t>(result_.generated_ids.size());
  // The next decode would need one more position than the context holds.
  const bool context_full = result_.prompt_tokens + n >= max_context_;
  if (n >= request_.max_new_tokens || context_full) {
    complete("length");
    return true;
  }
  return false;
}

void Sequence::complete(std::string reason) {
  // Text withheld as a possible stop string start, or an incomplete UTF-8 tail, is now final.
  if (decoder_ && !matcher_.stopped()) {
    StopMatcher::Step m = matcher_.feed(decoder_->finish());
    std::string tail = m.emit + (m.stopped ? std::string() : matcher_.flush());
    if (m.stopped) reason = "stop";
    result_.text += tail;
    if (!tail.empty()) handle_->push({-1, std::move(tail)});
  }
  result_.finish_reason = std::move(reason);
  finish();
}

void Sequence::finish() {
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const Clock::time_point now = Clock::now();
  ServeTimings& t = result_.timings;
  t.queue_s = secs(admitted_ - submitted_);
  if (first_token_ != Clock::time_point{}) {
    t.prefill_s = secs(first_token_ - admitted_);
    t.first_token_s = secs(first_token_ - submitted_);
    t.decode_s = secs(now - first_token_);
  } else {
    t.prefill_s = secs(now - admitted_); // ended before a first token (error, cancel)
  }
  done_ = true;
}

void Sequence::abort(const std::string& reason, const std::string& error) {
  if (done_) return;
  result_.finish_reason = reason;
  result_.error = error;
  finish();
}

} // namespace ninfer::serving
