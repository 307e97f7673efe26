// The engine loop (generation::Scheduler, CPU plugin) on a model that speculates: greedy and
// seeded-sampled requests decode in speculative rounds, several of them per round at different
// acceptance lengths, joining and leaving while others run; host-sampled requests keep decoding
// one token per step beside them. Each request equals the same request through the loop on a
// model without speculation (itself held to independent references by EngineLoop.* and
// MixedSteps.*), token for token (a sampled round draws the very tokens sampled decode draws with
// the same seed) and, for requests picked on the device, log-probability bit for bit: both
// models decode with the arithmetic of a verification pass (gated_delta_step's unfused form at
// every token count), so nothing but the rounds differs. A stop token or the length ends a
// request inside a round exactly where it ends it alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "../models/model_test_env.hpp"
#include "ninfer/generation/scheduler.hpp"
#include "ninfer/planning/schedule_table.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr const char* kDemo = "models/qwen3_5-demo";
constexpr int64_t kContext = 256;
// Prompts go in chunks of 16 whether others decode or not: a round takes other iterations than
// steps, so the sequences beside a prompt differ between the two loops, and only chunks that
// fall at the same positions give the same bits (a mixed step computes its chunk's rows as the
// chunk alone: MixedStep.RowsComputeBitForBitAsInStepsOfOneKind).
constexpr int32_t kPrefillChunk = 16;
constexpr int32_t kMixedChunk = kPrefillChunk;

// gated_delta_step's unfused form at every token count: a verification pass's arithmetic.
class MatchedRoutes {
 public:
  MatchedRoutes() {
    file_ = std::filesystem::temp_directory_path() / ("ninfer-spec-loop-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(file_) << "format: ninfer-schedule/1\narch: cpu\nentries:\n"
                            "  - {op: gated_delta_step, tokens: [1, 1048576], variant: unfused}\n";
    table_ = std::make_unique<ScheduleTable>(load_schedule_table(file_, data_dir() / "schemas"));
    check_against(*table_, cpu(), host_device());
  }
  ~MatchedRoutes() { std::filesystem::remove(file_); }
  Backend backend() const { return Backend(cpu(), host_device(), BackendOptions{"", 0, table_.get(), false}); }

 private:
  static const LoadedPlugin& cpu() { return *model_test_plugins().find("cpu"); }
  std::filesystem::path file_;
  std::unique_ptr<ScheduleTable> table_;
};

std::unique_ptr<CausalLM> model(Backend& be, const Checkpoint& ck, int32_t slots, int32_t drafts) {
  ModelOptions o;
  o.max_context = kContext;
  o.max_sequences = slots;
  o.prefill_chunk = kPrefillChunk;
  o.mixed_chunk = kMixedChunk;
  if (drafts) o.speculation = {SpecMethod::Mtp, drafts};
  return CausalLM::load(ck, be, o);
}

// Requests added at the iterations given (0: before the first), at most `slots` at once (a
// request waits for a free slot), each in the lowest free slot.
std::vector<SequenceOutcome> run_loop(CausalLM& lm, const std::vector<GenerationRequest>& requests,
                                      const std::vector<int64_t>& join_at, SchedulerStats* stats = nullptr) {
  Scheduler loop(lm);
  std::vector<SequenceOutcome> out(requests.size());
  std::vector<bool> ended(requests.size(), false), started(requests.size(), false);
  std::vector<int32_t> slot_of(requests.size(), -1);
  const int32_t slots = lm.options().max_sequences;
  int64_t iteration = 0;
  auto free_slot = [&]() -> int32_t {
    for (int32_t s = 0; s < slots; ++s) {
      bool used = false;
      for (size_t i = 0; i < requests.size(); ++i) used = used || (started[i] && !ended[i] && slot_of[i] == s);
      if (!used) return s;
    }
    return -1;
  };
  for (;;) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (started[i] || join_at[i] > iteration) continue;
      const int32_t s = free_slot();
      if (s < 0) break;
      started[i] = true;
      slot_of[i] = s;
      SequenceHooks h;
      h.on_end = [&, i](SequenceOutcome& o) {
        out[i] = std::move(o);
        ended[i] = true;
      };
      loop.add(s, requests[i], std::move(h));
    }
    if (!loop.busy() && std::all_of(started.begin(), started.end(), [](bool b) { return b; })) break;
    if (loop.busy()) loop.step();
    ++iteration;
  }
  if (stats) *stats = loop.stats();
  return out;
}

std::vector<GenerationRequest> requests_of(const Fixture& demo) {
  std::mt19937_64 rng(11);
  std::vector<GenerationRequest> r;
  auto greedy = [&](std::vector<int32_t> prompt, int64_t n) {
    GenerationRequest q;
    q.prompt_ids = std::move(prompt);
    q.sampling.temperature = 0;
    q.max_new_tokens = n;
    return q;
  };
  const auto& a = demo.cases[0].prompt;
  const auto& b = demo.cases[1].prompt;
  r.push_back(greedy(a, 40));
  r.push_back(greedy(b, 25));
  r.push_back(greedy({a.begin(), a.begin() + 5}, 33));
  GenerationRequest sampled = greedy(b, 20); // speculates: its picks are the sample op's
  sampled.sampling.temperature = 0.8;
  sampled.sampling.top_k = 40;
  sampled.sampling.seed = 5;
  r.push_back(sampled);
  GenerationRequest penalised = greedy(a, 12); // sampled on the host from its logits row
  penalised.sampling.repetition_penalty = 1.3;
  r.push_back(penalised);
  r.push_back(greedy({b.begin() + 3, b.end()}, 1));
  r.push_back(greedy({a.begin() + 2, a.end()}, 29));
  r.push_back(greedy({7}, 18));
  return r;
}

} // namespace

// Eight requests (five greedy of 1 to 40 tokens, one with a stop token found in its own
// continuation, a seeded sampled one and one with a repetition penalty, sampled on the host)
// joining at iterations
// 0 to 9 on 1, 2 and 4 slots, K = 1, 3, 5: each equals its run on the loop without speculation.
TEST(SpeculativeLoop, RequestsEqualTheLoopWithoutSpeculation) {
  const MatchedRoutes routes;
  const Fixture demo = Fixture::load(kDemo);
  std::vector<GenerationRequest> requests = requests_of(demo);
  const std::vector<int64_t> join_at{0, 0, 1, 2, 3, 5, 7, 9};
  Backend plain_be = routes.backend();
  auto plain = model(plain_be, demo.checkpoint, 4, 0);
  // A stop token inside request 6's continuation, so a round ends it mid-way.
  const std::vector<SequenceOutcome> probe = run_loop(*plain, requests, join_at);
  ASSERT_GT(probe[6].generated_ids.size(), 12u);
  requests[6].stop.token_ids.insert(probe[6].generated_ids[11]);
  const std::vector<SequenceOutcome> want = run_loop(*plain, requests, join_at);
  ASSERT_EQ(want[6].finish_reason, "stop");
  for (int32_t K : {1, 3, 5})
    for (int32_t slots : {1, 2, 4}) {
      Backend be = routes.backend();
      auto spec = model(be, demo.checkpoint, slots, K);
      SchedulerStats stats;
      const std::vector<SequenceOutcome> got = run_loop(*spec, requests, join_at, &stats);
      const std::string what = fmt::format("K {} slots {}", K, slots);
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(got[i].generated_ids, want[i].generated_ids) << what << " request " << i;
        EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << what << " request " << i;
        EXPECT_EQ(got[i].stop_token, want[i].stop_token) << what << " request " << i;
        // Requests picked on the device (greedy or sampled) speculate, the penalised one (sampled
        // on the host) decodes step by step; the device's picks carry their log-probabilities.
        const bool on_device = requests[i].sampling.repetition_penalty == 1.0;
        if (on_device && got[i].generated_logprobs.size() == want[i].generated_logprobs.size())
          EXPECT_EQ(std::memcmp(got[i].generated_logprobs.data(), want[i].generated_logprobs.data(),
                                sizeof(float) * want[i].generated_logprobs.size()),
                    0)
              << what << " request " << i << ": log-probabilities";
        if (on_device && got[i].generated_ids.size() > 1) EXPECT_GT(got[i].spec.rows, 0) << what << " request " << i;
        if (!on_device) EXPECT_EQ(got[i].spec.rows, 0) << what << " request " << i;
      }
      EXPECT_GT(stats.spec_rounds, 0) << what;
      EXPECT_GT(stats.spec.accepted_at.at(0), 0) << what << ": no draft was ever accepted";
      std::string by_position;
      for (size_t j = 0; j < stats.spec.accepted_at.size(); ++j) by_position += fmt::format(" {:.2f}", stats.spec.acceptance(j));
      std::printf("%s: %lld rounds, %lld rows, acceptance by position%s, mean accepted length %.2f\n", what.c_str(),
                  static_cast<long long>(stats.spec_rounds), static_cast<long long>(stats.spec.rows),
                  by_position.c_str(), stats.spec.mean_accepted_length());
    }
}
