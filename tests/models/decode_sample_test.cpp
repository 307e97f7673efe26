// Sampled picks of CausalLM::queue_step and the generation loop's device path: tokens drawn by the sample op
// on the backend equal the host Sampler's on the same logits, step after step, per row.
#include <gtest/gtest.h>

#include "model_test_env.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/sampling/sampler.hpp"

using namespace ninfer;
using namespace ninfer::test;

// Two sequences decoded together with sampled picks, each row with its own settings, against the
// same sequences decoded with their logits brought back and sampled on the host by a Sampler
// with the same seed (draw k at step k): the same ids and log-probabilities for 12 steps.
TEST(DecodeSample, EachRowDrawsWhatTheHostSamplerDraws) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend be = cpu_model_backend();
    auto dev = fixture_model(be, fx, 64, 2), host = fixture_model(be, fx, 64, 2);
    SamplingParams sp[2];
    sp[0].temperature = 1.5; // high temperature: a spread-out distribution on a tiny model
    sp[0].seed = 11;
    sp[1].temperature = 0.9;
    sp[1].top_k = 40;
    sp[1].top_p = 0.9;
    sp[1].min_p = 0.01;
    sp[1].seed = 12;
    const std::vector<int32_t> prompt = fx.cases[0].prompt;
    std::vector<Sampler> samplers = {Sampler(sp[0], prompt), Sampler(sp[1], prompt)};
    std::vector<int32_t> cur(2);
    for (int32_t s = 0; s < 2; ++s) {
      dev->prefill(s, prompt);
      const auto logits = host->prefill(s, prompt);
      cur[s] = samplers[s].next(logits).token; // draw 0 on the host, as generate() does
    }
    const std::vector<int32_t> slots = {0, 1};
    for (int step = 1; step <= 12; ++step) {
      std::vector<RowSampling> rows;
      for (int32_t s = 0; s < 2; ++s)
        rows.push_back({sp[s].temperature, static_cast<int32_t>(sp[s].top_k), sp[s].top_p, sp[s].min_p, *sp[s].seed,
                        static_cast<uint64_t>(step)});
      std::vector<float> lp;
      const std::vector<int32_t> got = decode_picks(*dev, slots, cur, rows, &lp);
      const std::vector<float> logits = decode_logits(*host, slots, cur);
      for (int32_t s = 0; s < 2; ++s) {
        const std::span<const float> row(logits.data() + s * fx.vocab, static_cast<size_t>(fx.vocab));
        const SampleResult want = samplers[s].next(row);
        EXPECT_EQ(got[s], want.token) << name << " slot " << s << " step " << step;
        EXPECT_NEAR(lp[s], want.logprob, 1e-5) << name << " slot " << s << " step " << step;
      }
      cur = got;
    }
  }
}

// generate() picks tokens with the sample op when nothing needs the host (no penalties, no
// logprob lists) and with the host Sampler otherwise; for the same seed the tokens are the same.
TEST(DecodeSample, GenerationGivesTheSameTokensOnTheDeviceAndHostPaths) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 64, 2);
  GenerationRequest req;
  req.prompt_ids = fx.cases[0].prompt;
  req.max_new_tokens = 16;
  req.sampling.temperature = 1.2;
  req.sampling.top_p = 0.95;
  req.sampling.seed = 2026;
  const GenerationResult device = generate(*lm, 0, nullptr, req);
  req.sampling.top_logprobs = 1; // forces the host path
  const GenerationResult host = generate(*lm, 1, nullptr, req);
  EXPECT_EQ(device.generated_ids, host.generated_ids);
  ASSERT_EQ(device.generated_logprobs.size(), host.generated_logprobs.size());
  for (size_t i = 0; i < host.generated_logprobs.size(); ++i)
    EXPECT_NEAR(device.generated_logprobs[i], host.generated_logprobs[i], 1e-5) << "token " << i;
  EXPECT_EQ(device.generated_ids.size(), 16u);
}
