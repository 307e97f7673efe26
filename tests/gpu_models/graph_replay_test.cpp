// CUDA graphs (issue 5): decode steps replayed from recordings produce bit-identical logits to
// the same steps launched op by op, for every batch size, across many steps whose contexts
// cross bucket boundaries, with sequences of different lengths in one batch. Both models hold
// the same seeded weights (Checkpoint::synthetic), each on its own backend.
#include <gtest/gtest.h>

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
