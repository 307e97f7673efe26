#include "sequence.hpp"

namespace ninfer::serving {

double unix_time(std::chrono::steady_clock::time_point t) {
  const auto steady_now = std::chrono::steady_clock::now();
  const auto system_now = std::chrono::system_clock::now();
  return std::chrono::duration<double>(system_now.time_since_epoch() - (steady_now - t)).count();
}

Sequence::Sequence(int32_t slot, GenerationRequest request, const RequestOptions& options,
                   std::shared_ptr<RequestHandle> handle, const Tokenizer* tokenizer, int64_t max_context,
                   Clock::time_point submitted)
    : slot_(slot), request_(std::move(request)), handle_(std::move(handle)), max_context_(max_context),
      sampler_(request_.sampling, request_.prompt_ids),
      text_(tokenizer, request_.stop.strings, options.reasoning, request_.prompt_ids), submitted_(submitted),
      admitted_(Clock::now()) {
  result_.prompt_tokens = static_cast<int64_t>(request_.prompt_ids.size());
  result_.user = options.user;
}

bool Sequence::on_logits(std::span<const float> row) {
  const SampleResult s = sampler_.next(row);
  if (first_token_ == Clock::time_point{}) first_token_ = Clock::now();
  if (request_.stop.is_stop_token(s.token)) {
    complete("stop");
    return true;
  }
  result_.generated_ids.push_back(s.token);
  result_.logprobs.push_back(s.logprob);
  result_.top_logprobs.push_back(s.top_logprobs);
  next_input_ = s.token;
  ReplyText::Out out = text_.push(s.token);
  handle_->push({s.token, std::move(out.text), out.reasoning, s.logprob, s.top_logprobs});
  if (out.stopped) {
    complete("stop");
    return true;
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
  ReplyText::Out tail = text_.finish();
  if (tail.stopped) reason = "stop";
  if (!tail.text.empty()) handle_->push({-1, std::move(tail.text), tail.reasoning});
  result_.text = text_.answer();
  result_.reasoning = text_.reasoning();
  result_.finish_reason = std::move(reason);
  finish();
}

void Sequence::finish() {
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const Clock::time_point now = Clock::now();
  ServeTimings& t = result_.timings;
  t.queue_s = secs(admitted_ - submitted_);
  t.submitted_at = unix_time(submitted_);
  t.admitted_at = unix_time(admitted_);
  if (first_token_ != Clock::time_point{}) {
    t.prefill_s = secs(first_token_ - admitted_);
    t.first_token_s = secs(first_token_ - submitted_);
    t.decode_s = secs(now - first_token_);
    t.first_token_at = unix_time(first_token_);
  } else {
    t.prefill_s = secs(now - admitted_); // ended before a first token (error, cancel)
  }
  done_ = true;
}

void Sequence::abort(const std::string& reason, const std::string& error) {
  if (done_) return;
  result_.text = text_.answer();
  result_.reasoning = text_.reasoning();
  result_.finish_reason = reason;
  result_.error = error;
  finish();
}

} // namespace ninfer::serving
