#include "sequence.hpp"

#include <spdlog/spdlog.h>

namespace ninfer::serving {

double unix_time(std::chrono::steady_clock::time_point t) {
  const auto steady_now = std::chrono::steady_clock::now();
  const auto system_now = std::chrono::system_clock::now();
  return std::chrono::duration<double>(system_now.time_since_epoch() - (steady_now - t)).count();
}

Sequence::Sequence(int32_t slot, const GenerationRequest& request, const RequestOptions& options,
                   std::shared_ptr<RequestHandle> handle, const Tokenizer* tokenizer, Clock::time_point submitted,
                   int64_t cached_tokens)
    : slot_(slot), handle_(std::move(handle)),
      text_(tokenizer, request.stop.strings, options.reasoning, request.prompt_ids), submitted_(submitted),
      prompt_(request.prompt_ids) {
  result_.prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  result_.cached_tokens = cached_tokens;
  result_.user = options.user;
}

SequenceHooks Sequence::hooks() {
  SequenceHooks h;
  h.on_token = [this](const SampleResult& s) { return on_token(s); };
  h.on_end = [this](SequenceOutcome& o) { on_end(o); };
  h.on_prompt_scored = [this](const SequenceOutcome& o) {
    StreamPiece p;
    p.prompt = PromptScores{o.prompt_logprobs, o.prompt_top};
    handle_->push(std::move(p));
  };
  h.cancelled = [this] { return handle_->cancelled(); };
  return h;
}

bool Sequence::on_token(const SampleResult& s) {
  result_.generated_ids.push_back(s.token);
  result_.logprobs.push_back(s.logprob);
  result_.top_logprobs.push_back(s.top_logprobs);
  ReplyText::Out out = text_.push(s.token);
  handle_->push({s.token, std::move(out.text), out.reasoning, s.logprob, s.top_logprobs});
  return out.stopped;
}

void Sequence::on_end(const SequenceOutcome& o) {
  std::string reason = o.finish_reason;
  if (reason == "stop" || reason == "length") {
    // Text withheld as a possible stop string start, or an incomplete UTF-8 tail, is now final.
    ReplyText::Out tail = text_.finish();
    if (tail.stopped) reason = "stop";
    if (!tail.text.empty()) handle_->push({-1, std::move(tail.text), tail.reasoning});
  } else if (reason == "error") {
    spdlog::error("the request in slot {} failed: {}", slot_, o.error);
  }
  result_.text = text_.answer();
  result_.reasoning = text_.reasoning();
  result_.finish_reason = std::move(reason);
  result_.error = o.error;
  stop_token_ = o.stop_token;
  result_.spec = o.spec;
  result_.forked_tokens = o.forked_tokens;
  result_.prompt_logprobs = o.prompt_logprobs;
  result_.prompt_top_logprobs = o.prompt_top;
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  ServeTimings& t = result_.timings;
  t.queue_s = secs(o.added - submitted_);
  t.submitted_at = unix_time(submitted_);
  t.admitted_at = unix_time(o.added);
  if (o.first_token != Clock::time_point{}) {
    t.prefill_s = secs(o.first_token - o.added);
    t.first_token_s = secs(o.first_token - submitted_);
    t.decode_s = secs(o.ended - o.first_token);
    t.first_token_at = unix_time(o.first_token);
  } else {
    t.prefill_s = secs(o.ended - o.added); // ended before a first token (error, cancel)
  }
  done_ = true;
}

std::vector<int32_t> Sequence::fed_tokens() const {
  std::vector<int32_t> t = prompt_;
  t.insert(t.end(), result_.generated_ids.begin(), result_.generated_ids.end());
  if (stop_token_) t.push_back(*stop_token_);
  return t;
}

} // namespace ninfer::serving
