#include "decoder.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ninfer/support/error.hpp"

namespace ninfer::models {
namespace {

ops::Rows rows_of(const DeviceBuffer& b, int64_t width) { return {b.as<float>(), width}; }

} // namespace

Decoder::Decoder(Backend& be, DecoderParts parts, const StepLimits& limits)
    : be_(be), parts_(std::move(parts)), limits_(limits), inputs_(be, limits), hidden_(parts_.embedding.cols) {
  for (const auto& l : parts_.layers) needs_ = needs_.max(l.mixer->needs()).max(l.mlp->needs());
  const int64_t T = limits.max_tokens;
  auto act = [&](int64_t per_token, const char* what) {
    return be.allocate(sizeof(float) * std::max<int64_t>(1, T * per_token), MemoryUse::Activations, what);
  };
  residual_ = act(hidden_, "residual stream");
  normed_ = act(hidden_, "normed hidden");
  proj_ = act(needs_.proj, "projections");
  inner_ = act(needs_.inner, "inner activations");
  core_ = act(needs_.core, "GDN core output");
  gates_ = act(needs_.gates, "GDN gates");
  // Every sequence of a decode step gets its logits row at once; long prompts that want all
  // rows get them in slices, so a 151k vocabulary never needs [prefill_chunk, vocab] floats.
  logit_rows_ = std::max<int64_t>(limits.max_sequences, std::min<int64_t>(T, 64));
  logits_ = be.allocate(sizeof(float) * logit_rows_ * vocab(), MemoryUse::Activations, "logits");
  picks_ = be.allocate(2 * sizeof(int32_t) * logit_rows_, MemoryUse::Activations, "picked token ids and log-probabilities");
  sample_params_ = be.allocate(sizeof(ninfer_sample_row) * logit_rows_, MemoryUse::Activations, "sampling parameters");
  scratch_ = {rows_of(proj_, needs_.proj), rows_of(inner_, needs_.inner), rows_of(core_, needs_.core),
              gates_.as<float>()};
  reserve_workspace();
}

void Decoder::run_layers(const Step& s) {
  const int64_t T = s.tokens;
  const ops::Rows resid = rows_of(residual_, hidden_), normed = rows_of(normed_, hidden_);
  const auto scale = parts_.norm_scale;
  const float eps = parts_.eps;
  ops::embedding(be_, s, parts_.embedding, resid);
  // The residual stream lives in `resid`: each block reads it through its norm (folded into its
  // first projection in decode) and its last projection adds the block's output to it.
  for (Layer& l : parts_.layers) {
    l.mixer->forward(be_, s, scratch_, {resid, &l.input_norm, scale, eps, normed}, resid);
    l.mlp->forward(be_, s, scratch_, {resid, &l.post_norm, scale, eps, normed}, resid);
  }
  ops::rms_norm(be_, T, resid, nullptr, parts_.final_norm, scale, eps, normed);
}

Step Decoder::forward(std::span<const SequenceChunk> chunks, Pick pick, bool ids_from_picks) {
  if (pick != Pick::None && pending_.size() >= kMostPendingPicks)
    throw Error(fmt::format("internal: {} picks are already waiting to be read", pending_.size()));
  Step s = inputs_.upload(chunks);
  if (ids_from_picks && last_pick_rows_ != s.tokens)
    throw Error(fmt::format("internal: a step of {} tokens cannot take its ids from a pick of {} rows", s.tokens,
                            last_pick_rows_));
  // Everything after the upload; a decode step records it as one unit, so a chained step's copy
  // of its ids (picks_ starts with them) is a node of its recording, not a launch of its own.
  const auto work = [&] {
    if (ids_from_picks) inputs_.copy_ids(picks_, s.tokens);
    run_layers(s);
    if (pick != Pick::None) run_pick(0, s.tokens, pick);
  };
  if (s.max_seq_tokens == 1) {
    s.kv_len = decode_bucket(s.kv_len);
    run_decode_step({s.tokens, s.kv_len, pick, ids_from_picks}, work);
  } else {
    work();
  }
  if (pick != Pick::None) send_picks(s.tokens);
  return s;
}

size_t Decoder::decode_recordings() const {
  size_t n = 0;
  for (const auto& [shape, rec] : recordings_) n += rec != nullptr;
  return n;
}

int32_t Decoder::decode_bucket(int32_t kv_len) const {
  constexpr int32_t kMinDecodeBucket = 256;
  int64_t b = kMinDecodeBucket;
  while (b < kv_len) b *= 2;
  return static_cast<int32_t>(std::min<int64_t>(b, limits_.max_context));
}

// The step's inputs live at addresses fixed by its token count (StepInputs; a decode step has
// one token per sequence) and every buffer is allocated once, so a recording made for a
// DecodeShape stays valid for every later step of that shape.
void Decoder::run_decode_step(const DecodeShape& shape, const std::function<void()>& launch) {
  if (!record_decode_) return launch();
  // The first step of a shape runs eagerly: whatever a variant sets up on first use (a library
  // handle, an algorithm choice) happens outside a capture; the recording is made the next time.
  // (A shape's entry exists from its first step; it holds a recording from its second.)
  const auto [it, first_step] = recordings_.try_emplace(shape);
  if (first_step) return launch();
  auto& rec = it->second;
  if (!rec) {
    try {
      rec = be_.record(launch);
    } catch (const Error& e) {
      recordings_.clear();
      record_decode_ = false;
      spdlog::warn("CUDA graphs off: a decode step could not be recorded ({}); launching kernels one by one", e.what());
      return launch();
    }
  }
  be_.replay(*rec);
}

void Decoder::logits(int64_t first, int64_t count, std::vector<float>& out) {
  const int64_t V = vocab();
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(count * V));
  for (int64_t r = 0; r < count; r += logit_rows_) {
    const int64_t n = std::min(logit_rows_, count - r);
    const ops::Rows src{normed_.as<float>() + (first + r) * hidden_, hidden_};
    ops::linear(be_, n, src, lm_head(), rows_of(logits_, V));
    be_.download(logits_, 0, out.data() + at + r * V, sizeof(float) * n * V);
  }
}

void Decoder::set_sample_rows(std::span<const ninfer_sample_row> rows) {
  if (static_cast<int64_t>(rows.size()) > logit_rows_)
    throw Error(fmt::format("internal: {} sampling rows exceed the {} rows of one pick", rows.size(), logit_rows_));
  be_.upload(sample_params_, 0, rows.data(), sizeof(ninfer_sample_row) * rows.size());
}

// The pick writes n ids, then their n log-probabilities, into picks_ (a decode step's pick is
// part of its recording).
void Decoder::run_pick(int64_t first, int64_t n, Pick pick) {
  if (n > logit_rows_) throw Error(fmt::format("internal: a pick of {} rows exceeds {} rows", n, logit_rows_));
  const int64_t V = vocab();
  const ops::Rows src{normed_.as<float>() + first * hidden_, hidden_};
  ops::linear(be_, n, src, lm_head(), rows_of(logits_, V));
  if (pick == Pick::Greedy)
    ops::argmax(be_, n, rows_of(logits_, V), static_cast<int32_t>(V), picks_.as<int32_t>(), picks_.as<float>() + n);
  else
    ops::sample(be_, n, rows_of(logits_, V), static_cast<int32_t>(V), sample_params_.as<ninfer_sample_row>(),
                picks_.as<int32_t>(), picks_.as<float>() + n);
  last_pick_rows_ = n;
}

// Outside the recordings: the result slot alternates, so a pick still unread is never
// overwritten by the next one.
void Decoder::send_picks(int64_t n) {
  be_.download_async(picks_, 0, 2 * sizeof(int32_t) * static_cast<size_t>(n), next_result_slot_);
  pending_.push_back({next_result_slot_, n});
  next_result_slot_ = (next_result_slot_ + 1) % kMostPendingPicks;
}

void Decoder::read_picks(std::vector<int32_t>& ids, std::vector<float>& logprobs) {
  static_assert(sizeof(int32_t) == sizeof(float));
  if (pending_.empty()) throw Error("internal: no pick is waiting to be read");
  const PendingPick p = pending_.front();
  pending_.pop_front();
  const auto* got = static_cast<const int32_t*>(be_.downloaded(p.slot));
  const auto n = static_cast<size_t>(p.rows);
  ids.insert(ids.end(), got, got + n);
  const size_t at = logprobs.size();
  logprobs.resize(at + n);
  std::memcpy(logprobs.data() + at, got + n, sizeof(float) * n);
}

void Decoder::reset(int32_t slot) {
  for (auto& l : parts_.layers) l.mixer->reset(be_, slot);
}

// Plans the largest prefill step and the largest decode step with the backend reserving
// workspace instead of launching, so every op a real step can issue finds its workspace
// already allocated.
void Decoder::reserve_workspace() {
  const int32_t ctx = static_cast<int32_t>(limits_.max_context);
  const int64_t T = limits_.max_tokens;
  Backend::SizingScope sizing(be_);
  run_layers(inputs_.shape_only(T, 1, static_cast<int32_t>(T), ctx));
  run_layers(inputs_.shape_only(limits_.max_sequences, limits_.max_sequences, 1, ctx));
  ops::linear(be_, logit_rows_, rows_of(normed_, hidden_), lm_head(), rows_of(logits_, vocab()));
  ops::argmax(be_, logit_rows_, rows_of(logits_, vocab()), static_cast<int32_t>(vocab()), nullptr, nullptr);
  ops::sample(be_, logit_rows_, rows_of(logits_, vocab()), static_cast<int32_t>(vocab()), nullptr, nullptr, nullptr);
}

} // namespace ninfer::models
