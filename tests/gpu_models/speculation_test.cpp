// Speculative decoding on the CUDA plugin (docs/speculative.md): the plugin plans a round at load
// (its Gated DeltaNet ops keep token states: the recurrent rule and the tiled conv), greedy rounds
// give greedy decode's tokens wherever greedy decode's top two logits are apart, and the demo
// head's first drafts on held-out text agree with the model as its training measured. Graph
// replay of rounds against eager rounds is in graph_replay_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "model_test_env.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr const char* kDemo = "models/qwen3_5-demo";
// A verification pass runs other kernels than a decode step (several rows per product, the
// prefill attention, the recurrent rule instead of the fused decode step), and a product of
// several rows may round its inputs to bfloat16 (cublaslt: relative 2^-8 per output,
// docs/cuda-pointwise-linear.md): logits of a few units move by up to ~0.03. Greedy picks may
// part only where the top two logits are closer than that.
constexpr double kGpuRouteTieMargin = 5e-2;
// As the CPU test's (tests/models/speculative_test.cpp): the trained agreement, 0.582, and the
// spread of ~900 tokens of three documents.
constexpr double kDemoTrainedAgreement = 0.582;
constexpr double kDemoAgreementTolerance = 0.08;

std::unique_ptr<CausalLM> load(Backend& be, const Checkpoint& ck, int32_t slots, int32_t drafts) {
  ModelOptions o;
  o.max_context = 512;
  o.max_sequences = slots;
  if (drafts) o.speculation = {SpecMethod::Mtp, drafts};
  return CausalLM::load(ck, be, o);
}

double top2_margin(const std::vector<float>& logits) {
  std::vector<float> v = logits;
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<>());
  return static_cast<double>(v[0]) - v[1];
}

} // namespace

// K = 1..5, rounds of 1 to 4 sequences: each sequence's tokens are plain greedy decode's on the
// same plugin up to the first near-tie.
TEST(SpeculationGpu, GreedyRoundsPartFromGreedyDecodeOnlyAtNearTies) {
  NINFER_FIXTURE_BACKEND(plain_be);
  const Fixture demo = Fixture::load(kDemo);
  auto plain = load(*plain_be, demo.checkpoint, 1, 0);
  std::vector<std::vector<int32_t>> prompts;
  for (const FixtureCase& c : demo.cases) prompts.push_back(c.prompt);
  prompts.push_back({demo.cases[0].prompt.begin(), demo.cases[0].prompt.begin() + 4});
  prompts.push_back({demo.cases[1].prompt.begin() + 2, demo.cases[1].prompt.end()});
  constexpr size_t kTokens = 48;
  // Plain greedy with each step's logits (for the margins).
  std::vector<std::vector<int32_t>> want(prompts.size());
  std::vector<std::vector<double>> margin(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    plain->reset(0);
    std::vector<float> logits = plain->prefill(0, prompts[i]);
    while (want[i].size() < kTokens) {
      want[i].push_back(argmax(logits));
      margin[i].push_back(top2_margin(logits));
      const StepRow r{.slot = 0, .ids = std::span(&want[i].back(), 1), .logits = true};
      plain->queue_step(std::span(&r, 1));
      logits = plain->next_result().logits;
    }
  }
  for (int32_t K = 1; K <= kMostDraftTokens; ++K) {
    auto be = fixture_backend();
    auto spec = load(*be, demo.checkpoint, 4, K);
    std::vector<std::vector<int32_t>> got(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) got[i].push_back(argmax(spec->prefill(static_cast<int32_t>(i), prompts[i])));
    int64_t accepted = 0;
    for (bool first = true;; first = false) {
      std::vector<SpecRow> rows;
      std::vector<size_t> who;
      for (size_t i = 0; i < prompts.size(); ++i)
        if (got[i].size() < kTokens) {
          rows.push_back({.slot = static_cast<int32_t>(i)});
          if (first) rows.back().id = got[i].back();
          who.push_back(i);
        }
      if (rows.empty()) break;
      spec->queue_spec_round(rows);
      const StepResult r = spec->next_result();
      const size_t D = r.ids.size() / rows.size();
      for (size_t k = 0; k < rows.size(); ++k) {
        accepted += r.accepted[k];
        for (int32_t j = 0; j <= r.accepted[k]; ++j) got[who[k]].push_back(r.ids[k * D + static_cast<size_t>(j)]);
      }
    }
    EXPECT_GT(accepted, 0) << "K " << K;
    size_t compared = 0;
    for (size_t i = 0; i < prompts.size(); ++i)
      for (size_t t = 0; t < kTokens; ++t) {
        if (got[i][t] == want[i][t]) {
          ++compared;
          continue;
        }
        EXPECT_LE(margin[i][t], kGpuRouteTieMargin) << "K " << K << " prompt " << i << " token " << t;
        break;
      }
    EXPECT_GE(compared, prompts.size() * kTokens * 3 / 4) << "K " << K << ": too few tokens before near-ties";
  }
}

TEST(SpeculationGpu, DemoHeadAgreesWithTheModelAsTrained) {
  NINFER_FIXTURE_BACKEND(be);
  const Fixture demo = Fixture::load(kDemo);
  const Tokenizer tok = Tokenizer::load(source_dir() / kDemo / "tokenizer.json");
  ModelOptions o;
  o.max_context = 1024;
  o.prefill_chunk = 1024;
  o.speculation = {SpecMethod::Mtp, 1};
  auto lm = CausalLM::load(demo.checkpoint, *be, o);
  const auto V = static_cast<size_t>(lm->vocab_size());
  std::ifstream in(source_dir() / "tests/models/data/sotu_heldout.txt");
  std::string line;
  int64_t agree = 0, total = 0;
  while (std::getline(in, line)) {
    const std::vector<int32_t> ids = tok.encode(line);
    lm->reset(0);
    const std::vector<float> model = lm->prefill(0, ids, LogitsFor::All);
    const std::vector<float> head = lm->last_step_draft_logits(1, static_cast<int64_t>(ids.size()) - 1);
    for (size_t p = 1; p + 1 < ids.size(); ++p) {
      const std::span<const float> m(model.data() + p * V, V), h(head.data() + (p - 1) * V, V);
      agree += std::max_element(m.begin(), m.end()) - m.begin() == std::max_element(h.begin(), h.end()) - h.begin();
      ++total;
    }
  }
  ASSERT_GT(total, 800);
  const double agreement = static_cast<double>(agree) / static_cast<double>(total);
  std::printf("demo head on the GPU: first draft = the model's next argmax on %.3f of %lld held-out tokens\n",
              agreement, static_cast<long long>(total));
  EXPECT_NEAR(agreement, kDemoTrainedAgreement, kDemoAgreementTolerance);
}
