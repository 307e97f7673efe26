// CUDA graphs (issue 5): decode steps replayed from recordings produce bit-identical logits to
// the same steps launched op by op, for every batch size, across many steps whose contexts
// cross bucket boundaries, with sequences of different lengths in one batch. Both models hold
// the same seeded weights (Checkpoint::synthetic), each on its own backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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

std::unique_ptr<CausalLM> load(Backend& be, const Checkpoint& ck, bool graphs) {
  ModelOptions mo;
  mo.max_context = 1200;
  mo.max_sequences = 4;
  mo.prefill_chunk = 256;
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
    const auto a = eager->decode(slots, ids), b = graphed->decode(slots, ids);
    ASSERT_EQ(a.size(), static_cast<size_t>(batch * V));
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "step " << step << ", batch " << batch;
    for (int32_t i = 0; i < batch; ++i)
      next[static_cast<size_t>(slots[static_cast<size_t>(i)])] = argmax(row(a, i, V));
  }
  // The greedy path replays the same recordings.
  const int32_t slots[2] = {0, 3}, ids[2] = {next[0], next[3]};
  EXPECT_EQ(eager->decode_greedy(slots, ids), graphed->decode_greedy(slots, ids));
  EXPECT_TRUE(graphed->decode_graphs_active()) << "a recording failed and the model fell back to eager launches";
  // One recording per (batch size, bucket): all 4 batch sizes, and batch 1 in two buckets (slot 0
  // alone stays in 256, slot 3 alone is past 512).
  EXPECT_GE(graphed->decode_graphs_recorded(), 5u);
  EXPECT_EQ(eager->decode_graphs_recorded(), 0u);
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
// eager model's logits with its float64 log-probability; sampled steps draw, bit for bit, what
// the eager model draws (new draw numbers each step: a recording that kept its first rows would
// fail). Batch sizes 1-3, each pick recorded separately.
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
      got = graphed->decode_greedy(slots, ids, &lp);
      const std::vector<float> logits = eager->decode(slots, ids);
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
      got = graphed->decode_sample(slots, ids, rows, &lp);
      ASSERT_EQ(got, eager->decode_sample(slots, ids, rows, &want_lp)) << "sampled step " << step;
      ASSERT_EQ(std::memcmp(lp.data(), want_lp.data(), lp.size() * 4), 0) << "sampled step " << step;
    }
    for (int32_t i = 0; i < batch; ++i) next[static_cast<size_t>(slots[static_cast<size_t>(i)])] = got[static_cast<size_t>(i)];
  }
  EXPECT_TRUE(graphed->decode_graphs_active()) << "a recording failed and the model fell back to eager launches";
  // 3 batch sizes x 2 picks, each seen 8 times: recorded at its second step.
  EXPECT_GE(graphed->decode_graphs_recorded(), 6u);
}

// Steps queued two deep, each fed on the device by the previous step's pick (ninfer-run's
// generation and ninfer-bench decode this way), replayed from recordings: the same ids and
// log-probabilities, bit for bit, as eager decode_greedy one step at a time; across the 512 and
// 1,024 buckets (the longer sequence passes 512).
TEST(CudaGraphs, QueuedStepsFedOnTheDevicePickWhatEagerStepsPick) {
  NINFER_FIXTURE_BACKEND(eager_be);
  auto graph_be = fixture_backend();
  const Checkpoint ck = Checkpoint::synthetic(replay_config(), DType::BF16, 13);
  auto eager = load(*eager_be, ck, false);
  auto graphed = load(*graph_be, ck, true);
  auto rng = fresh_rng("graph replay queued");
  std::uniform_int_distribution<int32_t> id(0, 151000);
  const std::vector<int32_t> slots = {2, 0};
  std::vector<int32_t> cur;
  for (int32_t s : slots) {
    std::vector<int32_t> p(static_cast<size_t>(s == 2 ? 240 : 490));
    for (auto& t : p) t = id(rng);
    eager->prefill(s, p);
    cur.push_back(argmax(graphed->prefill(s, p)));
  }
  constexpr int kSteps = 40;
  graphed->queue_decode(slots, cur);
  for (int step = 1; step <= kSteps; ++step) {
    if (step < kSteps) graphed->queue_decode(slots, {});
    std::vector<float> lp, want_lp;
    const std::vector<int32_t> got = graphed->next_picks(&lp);
    const std::vector<int32_t> want = eager->decode_greedy(slots, cur, &want_lp);
    ASSERT_EQ(got, want) << "step " << step;
    ASSERT_EQ(std::memcmp(lp.data(), want_lp.data(), lp.size() * 4), 0) << "step " << step;
    cur = got;
  }
  EXPECT_TRUE(graphed->decode_graphs_active());
  EXPECT_GE(graphed->decode_graphs_recorded(), 2u); // batch 2, chained, in the 512 and 1,024 buckets
}
