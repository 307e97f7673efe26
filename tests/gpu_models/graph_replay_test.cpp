// CUDA graphs (issue 5): decode steps replayed from recordings produce bit-identical logits to
// the same steps launched op by op, for every batch size, across many steps whose contexts
// cross bucket boundaries, with sequences of different lengths in one batch. Both models hold
// the same seeded weights (Checkpoint::synthetic), each on its own backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "model_test_env.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Qwen3.5's hybrid layout (both mixers) with full-attention layers that read a KV cache.
ModelConfig replay_config() {
  ModelConfig c = shape_preset_config("qwen3_5-cpu-small");
  c.max_position_embeddings = 2048;
  return c;
}

std::unique_ptr<CausalLM> load(Backend& be, const Checkpoint& ck, bool graphs, int32_t mixed_chunk = 0) {
  ModelOptions mo;
  mo.max_context = 1200;
  mo.max_sequences = 4;
  mo.prefill_chunk = 256;
  mo.mixed_chunk = mixed_chunk;
  mo.weights = WeightPrecision::BF16;
  mo.cuda_graphs = graphs;
  return CausalLM::load(ck, be, mo);
}

} // namespace

TEST(CudaGraphs, ReplayIsBitIdenticalToEagerForEveryBatchSize) {
  NINFER_FIXTURE_BACKEND(eager_be);
  auto graph_be = fixture_backend();
  ASSERT_TRUE(graph_be->can_record());
  const Checkpoint ck = Checkpoint::synthetic(replay_config(), DType::BF16, 5);
  auto eager = load(*eager_be, ck, false);
  auto graphed = load(*graph_be, ck, true);
  ASSERT_FALSE(eager->decode_graphs_active());
  ASSERT_TRUE(graphed->decode_graphs_active());
  const int64_t V = ck.config().vocab_size;

  // Four sequences of different lengths; the longest crosses the 256 and 512 buckets while
  // decoding, the others stay inside theirs for a while.
  auto rng = fresh_rng("graph replay prompts");
  std::uniform_int_distribution<int32_t> id(0, 151000);
  const int64_t lengths[4] = {3, 250, 500, 700};
  std::vector<int32_t> next(4);
  for (int32_t s = 0; s < 4; ++s) {
    std::vector<int32_t> p(static_cast<size_t>(lengths[s]));
    for (auto& t : p) t = id(rng);
    const auto a = eager->prefill(s, p), b = graphed->prefill(s, p);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "prefill of slot " << s;
    next[static_cast<size_t>(s)] = argmax(a);
  }
  // Every batch size 1..4 in turn (each its own recordings), 80 steps in all.
  for (int step = 0; step < 80; ++step) {
    const int32_t batch = 1 + step % 4;
    std::vector<int32_t> slots, ids;
    for (int32_t i = 0; i < batch; ++i) {
      const int32_t s = (step + i) % 4;
      slots.push_back(s);
      ids.push_back(next[static_cast<size_t>(s)]);
    }
    const auto a = decode_logits(*eager, slots, ids), b = decode_logits(*graphed, slots, ids);
    ASSERT_EQ(a.size(), static_cast<size_t>(batch * V));
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "step " << step << ", batch " << batch;
    for (int32_t i = 0; i < batch; ++i)
      next[static_cast<size_t>(slots[static_cast<size_t>(i)])] = argmax(row(a, i, V));
  }
  // The greedy path replays the same recordings.
  const int32_t slots[2] = {0, 3}, ids[2] = {next[0], next[3]};
  EXPECT_EQ(decode_picks(*eager, slots, ids), decode_picks(*graphed, slots, ids));
  EXPECT_TRUE(graphed->decode_graphs_active()) << "a recording failed and the model fell back to eager launches";
  // One recording per (batch size, bucket): all 4 batch sizes, and batch 1 in two buckets (slot 0
  // alone stays in 256, slot 3 alone is past 512).
  EXPECT_GE(graphed->decode_graphs_recorded(), 5u);
  EXPECT_EQ(eager->decode_graphs_recorded(), 0u);
}

// Mixed steps of mixed_chunk tokens are recorded like decode steps (one recording per rows, context
// bucket and picked rows): a 700-token prompt read in chunks of 16 beside three decoding
// sequences (the longest 200 tokens deep, so the rows stay in the 256 bucket), its chunks
// crossing the 256 and 512 buckets, one decode row greedy and one sampled. Every chunk row's
// logits and every pick and log-probability equal the eager model's bit for bit, and the graphed
// model made exactly one recording per bucket: a replay that kept a chunk's positions, its span
// or a draw number would fail, and so would recording the prompt's last chunk of 12 tokens.
TEST(CudaGraphs, MixedStepsReplayBitIdenticalToEager) {
  constexpr int32_t kChunk = 16;
  NINFER_FIXTURE_BACKEND(eager_be);
  auto graph_be = fixture_backend();
  ASSERT_TRUE(graph_be->can_record());
  const Checkpoint ck = Checkpoint::synthetic(replay_config(), DType::BF16, 5);
  auto eager = load(*eager_be, ck, false, kChunk);
  auto graphed = load(*graph_be, ck, true, kChunk);
  auto rng = fresh_rng("graph replay mixed steps");
  std::uniform_int_distribution<int32_t> id(0, 151000);
  const auto prompt = [&](int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = id(rng);
    return p;
  };
  std::vector<int32_t> first;
  for (int32_t s = 0; s < 3; ++s) {
    const std::vector<int32_t> p = prompt(std::array<int64_t, 3>{5, 40, 200}[static_cast<size_t>(s)]);
    const auto a = eager->prefill(s, p), b = graphed->prefill(s, p);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "prefill of slot " << s;
    first.push_back(argmax(a));
  }
  ASSERT_EQ(graphed->decode_graphs_recorded(), 0u);
  const std::vector<int32_t> long_prompt = prompt(700);
  const auto P = static_cast<int64_t>(long_prompt.size());
  int64_t read = 0;
  for (uint64_t j = 0; read < P; ++j) {
    const int64_t n = std::min<int64_t>(kChunk, P - read);
    const bool last = read + n == P;
    std::vector<StepRow> rows{{.slot = 3,
                               .ids = std::span(long_prompt).subspan(static_cast<size_t>(read), static_cast<size_t>(n)),
                               .pick = last}};
    for (int32_t s = 0; s < 3; ++s) {
      StepRow r{.slot = s};
      if (j == 0) r.ids = std::span(&first[static_cast<size_t>(s)], 1); // then fed by their picks
      if (s == 1) r.sampling = {.temperature = 0.9, .seed = 7, .draw = j};
      rows.push_back(r);
    }
    eager->queue_step(rows);
    graphed->queue_step(rows);
    const std::vector<float> ea = eager->last_step_logits(0, n), ga = graphed->last_step_logits(0, n);
    ASSERT_EQ(std::memcmp(ea.data(), ga.data(), ea.size() * 4), 0) << "chunk rows of mixed step " << j;
    const StepResult er = eager->next_result(), gr = graphed->next_result();
    ASSERT_EQ(er.ids, gr.ids) << "mixed step " << j;
    ASSERT_EQ(std::memcmp(er.logprobs.data(), gr.logprobs.data(), er.logprobs.size() * 4), 0) << "mixed step " << j;
    read += n;
  }
  EXPECT_TRUE(graphed->decode_graphs_active()) << "a recording failed and the model fell back to eager launches";
  // The 43 full chunks beside three rows: one recording per bucket (256, 512, 1024); the last
  // chunk runs eagerly.
  EXPECT_EQ(graphed->decode_graphs_recorded(), 3u);
}

namespace {

// A device log-probability (float log-softmax over the vocabulary) against the float64 one.
constexpr double kPickLogprobTol = 1e-4;

double log_softmax_at(const std::vector<float>& logits, int32_t id) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - top);
  return double(logits[static_cast<size_t>(id)]) - top - std::log(sum);
}

} // namespace

// A decode step's token choice is part of its recording (the LM head, then argmax or sample; the
// picks' copy to the host follows the replay). Greedy steps of the graphed model pick the argmax of the
// eager model's logits with its float64 log-probability, and the one row that asks for its logits
// gets the eager model's row bit for bit (only that row comes back); sampled steps draw, bit for
// bit, what the eager model draws (new draw numbers each step: a recording that kept its first
// rows would fail). Batch sizes 1-3, each pick recorded separately.
TEST(CudaGraphs, TheStepsPickIsRecordedWithItsLayers) {
  NINFER_FIXTURE_BACKEND(eager_be);
  auto graph_be = fixture_backend();
  const Checkpoint ck = Checkpoint::synthetic(replay_config(), DType::BF16, 9);
  auto eager = load(*eager_be, ck, false);
  auto graphed = load(*graph_be, ck, true);
  const int64_t V = ck.config().vocab_size;
  auto rng = fresh_rng("graph replay picks");
  std::uniform_int_distribution<int32_t> id(0, 151000);
  std::vector<int32_t> next(3);
  for (int32_t s = 0; s < 3; ++s) {
    std::vector<int32_t> p(static_cast<size_t>(1 + 200 * s));
    for (auto& t : p) t = id(rng);
    eager->prefill(s, p);
    next[static_cast<size_t>(s)] = argmax(graphed->prefill(s, p));
  }
  for (int step = 0; step < 48; ++step) {
    const int32_t batch = 1 + step % 3;
    std::vector<int32_t> slots, ids;
    for (int32_t i = 0; i < batch; ++i) {
      slots.push_back((step + i) % 3);
      ids.push_back(next[static_cast<size_t>(slots.back())]);
    }
    std::vector<float> lp;
    std::vector<int32_t> got;
    if (step % 2 == 0) {
      std::vector<StepRow> rows;
      for (int32_t i = 0; i < batch; ++i)
        rows.push_back({.slot = slots[static_cast<size_t>(i)], .ids = std::span(&ids[static_cast<size_t>(i)], 1),
                        .logits = i == batch - 1});
      graphed->queue_step(rows);
      const StepResult res = graphed->next_result();
      got = res.ids;
      lp = res.logprobs;
      const std::vector<float> logits = decode_logits(*eager, slots, ids);
      ASSERT_EQ(res.logits.size(), static_cast<size_t>(V)) << "only the last row's logits come back";
      ASSERT_EQ(std::memcmp(res.logits.data(), logits.data() + (batch - 1) * V, V * 4), 0) << "step " << step;
      for (int32_t i = 0; i < batch; ++i) {
        const std::vector<float> r = row(logits, i, V);
        ASSERT_EQ(got[static_cast<size_t>(i)], argmax(r)) << "greedy step " << step << ", row " << i;
        EXPECT_NEAR(lp[static_cast<size_t>(i)], log_softmax_at(r, got[static_cast<size_t>(i)]), kPickLogprobTol)
            << "greedy step " << step << ", row " << i;
      }
    } else {
      std::vector<RowSampling> rows;
      for (int32_t s : slots) rows.push_back({0.8, 50, 0.9, 0.0, 100u + static_cast<uint64_t>(s), uint64_t(step)});
      std::vector<float> want_lp;
      got = decode_picks(*graphed, slots, ids, rows, &lp);
      ASSERT_EQ(got, decode_picks(*eager, slots, ids, rows, &want_lp)) << "sampled step " << step;
      ASSERT_EQ(std::memcmp(lp.data(), want_lp.data(), lp.size() * 4), 0) << "sampled step " << step;
    }
    for (int32_t i = 0; i < batch; ++i) next[static_cast<size_t>(slots[static_cast<size_t>(i)])] = got[static_cast<size_t>(i)];
  }
  EXPECT_TRUE(graphed->decode_graphs_active()) << "a recording failed and the model fell back to eager launches";
  // 3 batch sizes x 2 picks, each seen 8 times: recorded at its second step.
  EXPECT_GE(graphed->decode_graphs_recorded(), 6u);
}

// Steps queued two deep, each row fed on the device by its slot's previous pick (the engine loop
// of ninfer-run and ninfer-serve, and ninfer-bench, decode this way), replayed from recordings,
// while the rows change: the slots swap places, one sits steps out and rejoins. The same ids and
// log-probabilities, bit for bit, as eager greedy steps of the same rows read one at a time;
// across the 512 and 1,024 buckets (the longer sequence passes 512).
TEST(CudaGraphs, QueuedStepsFedOnTheDevicePickWhatEagerStepsPick) {
  NINFER_FIXTURE_BACKEND(eager_be);
  auto graph_be = fixture_backend();
  const Checkpoint ck = Checkpoint::synthetic(replay_config(), DType::BF16, 13);
  auto eager = load(*eager_be, ck, false);
  auto graphed = load(*graph_be, ck, true);
  auto rng = fresh_rng("graph replay queued");
  std::uniform_int_distribution<int32_t> id(0, 151000);
  std::vector<int32_t> cur(3);
  for (int32_t s : {2, 0}) {
    std::vector<int32_t> p(static_cast<size_t>(s == 2 ? 240 : 490));
    for (auto& t : p) t = id(rng);
    eager->prefill(s, p);
    cur[static_cast<size_t>(s)] = argmax(graphed->prefill(s, p));
  }
  // Step k's slots: both, in turn in either order; slot 2 alone now and then (slot 0 then
  // continues from a pick two steps back).
  auto slots_of = [](int k) {
    if (k % 7 == 5 || k % 7 == 6) return std::vector<int32_t>{2};
    return k % 2 ? std::vector<int32_t>{0, 2} : std::vector<int32_t>{2, 0};
  };
  constexpr int kSteps = 40;
  std::vector<StepRow> first;
  for (int32_t s : slots_of(0)) first.push_back({.slot = s, .ids = std::span(&cur[static_cast<size_t>(s)], 1)});
  graphed->queue_step(first);
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      std::vector<StepRow> chained;
      for (int32_t s : slots_of(step + 1)) chained.push_back({.slot = s});
      graphed->queue_step(chained);
    }
    const std::vector<int32_t> slots = slots_of(step);
    std::vector<int32_t> ids;
    for (int32_t s : slots) ids.push_back(cur[static_cast<size_t>(s)]);
    const StepResult got = graphed->next_result();
    std::vector<float> want_lp;
    const std::vector<int32_t> want = decode_picks(*eager, slots, ids, {}, &want_lp);
    ASSERT_EQ(got.ids, want) << "step " << step;
    ASSERT_EQ(std::memcmp(got.logprobs.data(), want_lp.data(), want_lp.size() * 4), 0) << "step " << step;
    for (size_t i = 0; i < slots.size(); ++i) cur[static_cast<size_t>(slots[i])] = got.ids[i];
  }
  EXPECT_TRUE(graphed->decode_graphs_active());
  EXPECT_GE(graphed->decode_graphs_recorded(), 3u); // batches 1 and 2, in the 512 and 1,024 buckets
}

// Speculative rounds (docs/speculative.md) replay from recordings made per (rows, context bucket,
// pick, drafts) bit for bit as rounds launched op by op: picks, log-probabilities and accepted
// counts, over 2,000 rounds of 1 to 8 sequences, greedy and sampled in turn (new draw numbers each
// round), whose acceptance lengths differ within a round (the trained demo head: drafts are
// accepted and rejected), sequences restarting with new prompts when their context is full, and
// then the logits of the next token (the states the rounds settled).
TEST(CudaGraphs, SpeculativeRoundsReplayBitIdenticalToEager) {
  constexpr int32_t kSlots = 8;
  constexpr int kRounds = 2000;
  NINFER_FIXTURE_BACKEND(eager_be);
  auto graph_be = fixture_backend();
  const Checkpoint ck = Checkpoint::open(source_dir() / "models/qwen3_5-demo");
  auto load_spec = [&](Backend& be, bool graphs) {
    ModelOptions mo;
    mo.max_context = 640;
    mo.max_sequences = kSlots;
    mo.cuda_graphs = graphs;
    mo.speculation = {SpecMethod::Mtp, 3};
    return CausalLM::load(ck, be, mo);
  };
  auto eager = load_spec(*eager_be, false), graphed = load_spec(*graph_be, true);
  ASSERT_TRUE(graphed->decode_graphs_active());
  auto rng = fresh_rng("speculative graph replay");
  std::uniform_int_distribution<int32_t> id(3, 8000);
  std::vector<std::optional<int32_t>> first(kSlots);
  auto restart = [&](int32_t s) {
    std::vector<int32_t> p(static_cast<size_t>(1 + (rng() % 120)));
    for (auto& t : p) t = id(rng);
    eager->reset(s);
    graphed->reset(s);
    const auto a = eager->prefill(s, p), b = graphed->prefill(s, p);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "prefill of slot " << s;
    first[static_cast<size_t>(s)] = argmax(a);
  };
  for (int32_t s = 0; s < kSlots; ++s) restart(s);
  int64_t rounds = 0, mixed = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int32_t batch = 1 + round % kSlots;
    const bool sampled = (round / kSlots) % 2 == 1;
    std::vector<SpecRow> rows;
    for (int32_t i = 0; i < batch; ++i) {
      const int32_t s = (round + i) % kSlots;
      if (eager->position(s) + 4 > 640) restart(s);
      rows.push_back({.slot = s, .id = first[static_cast<size_t>(s)]});
      if (sampled) rows.back().sampling = {.temperature = 0.8, .top_k = 40, .seed = 9, .draw = 4u * static_cast<uint64_t>(round)};
      first[static_cast<size_t>(s)].reset();
    }
    eager->queue_spec_round(rows);
    graphed->queue_spec_round(rows);
    const StepResult a = eager->next_result(), b = graphed->next_result();
    ASSERT_EQ(a.ids, b.ids) << "round " << round;
    ASSERT_EQ(a.accepted, b.accepted) << "round " << round;
    ASSERT_EQ(std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * 4), 0) << "round " << round;
    ++rounds;
    mixed += std::adjacent_find(a.accepted.begin(), a.accepted.end(), std::not_equal_to<>()) != a.accepted.end();
  }
  EXPECT_GT(mixed, kRounds / 10) << "too few rounds whose rows accepted different numbers of drafts";
  for (int32_t s = 0; s < kSlots; ++s) {
    const int32_t probe = 11;
    const auto a = eager->prefill(s, std::span(&probe, 1)), b = graphed->prefill(s, std::span(&probe, 1));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "slot " << s << " after the rounds";
  }
  EXPECT_TRUE(graphed->decode_graphs_active()) << "a round's recording failed and the model fell back to eager";
  EXPECT_GE(graphed->decode_graphs_recorded(), static_cast<size_t>(kSlots)); // every batch size, one bucket at least
  EXPECT_EQ(rounds, kRounds);
}
