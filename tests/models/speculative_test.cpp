// Speculative decoding with the MTP head (docs/speculative.md) on the CPU plugin: greedy rounds
// give exactly the tokens greedy decode gives, on the trained demo model and on the Qwen3.5
// fixture with a random head (whose drafts are mostly rejected), for every number of drafts and
// with sequences joining and leaving a batch; a round leaves the model's state (Gated DeltaNet
// states, KV rows, the head's KV cache and hidden state) as plain decode leaves it; the demo
// head's first drafts on held-out text agree with the model as often as its training measured;
// and what cannot run is refused.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "model_test_env.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/checkpoint/safetensors_writer.hpp"
#include "ninfer/models/linear_observer.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "temp_dir.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr const char* kDemo = "models/qwen3_5-demo";

// The demo model's README: its MTP head's argmax equalled the model's next argmax on 58.2% of
// 188,928 held-out tokens (tools/train-demo/evaluate.py, mtp_agreement).
constexpr double kDemoTrainedAgreement = 0.582;
// The agreement measured here is over ~940 tokens of three held-out addresses: a binomial
// standard deviation of 0.016 and a spread between documents of a few points (the training
// run's figure averages 34 documents). 0.08 is that spread and 3 standard deviations; a wrong
// head (its two input halves swapped, positions off by one, a norm's scale w instead of 1 + w)
// agrees on 0.1 to 0.3 of them.
constexpr double kDemoAgreementTolerance = 0.08;

// A copy of a fixture with a random MTP head (mtp_num_hidden_layers 1, tensors drawn by
// ninfer-make-checkpoint's initialisation): its drafts are noise, so its rounds mostly reject,
// and the output must still be exactly greedy decode's.
std::filesystem::path with_random_mtp(const std::string& fixture, const TempDir& dir) {
  const auto src = fixtures_dir() / fixture;
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src / "config.json"));
  cfg["mtp_num_hidden_layers"] = 1;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  const Checkpoint ck = Checkpoint::open(src);
  std::vector<TensorSpec> specs;
  std::vector<std::vector<float>> values;
  for (const std::string& name : ck.names()) {
    const TensorView& t = ck.tensor(name);
    specs.push_back({name, t.dtype, t.shape});
    values.emplace_back();
  }
  ModelConfig with_head = ck.config();
  with_head.mtp_num_hidden_layers = 1;
  for (const ExpectedTensor& e : mtp_tensors(with_head)) {
    specs.push_back({e.name, DType::F32, e.shape});
    values.push_back(random_tensor_values(e, 7));
  }
  write_safetensors(dir / "model.safetensors", specs, [&](size_t i, std::span<std::byte> dst) {
    if (values[i].empty()) std::memcpy(dst.data(), ck.tensor(specs[i].name).data, dst.size());
    else std::memcpy(dst.data(), values[i].data(), dst.size());
  });
  return dir.path();
}

std::unique_ptr<CausalLM> load(const Checkpoint& ck, Backend& be, int32_t slots, int32_t drafts,
                               int64_t context = 512, int32_t draft_vocab = 0,
                               DraftHead draft_head = DraftHead::LmHead) {
  ModelOptions o;
  o.max_context = context;
  o.max_sequences = slots;
  if (drafts > 0) o.speculation = {SpecMethod::Mtp, drafts, draft_vocab, 0, draft_head};
  return CausalLM::load(ck, be, o);
}

// What one sequence produced: ids and their log-probabilities, bit for bit comparable.
struct Tokens {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  bool operator==(const Tokens& o) const {
    return ids == o.ids && logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), sizeof(float) * logprobs.size()) == 0;
  }
};

// Greedy decode alone in slot 0: the first token from the prompt's logits, then one step per
// token (logprobs from the step's pick; the first one's from the prefill logits).
Tokens plain_greedy(CausalLM& lm, const std::vector<int32_t>& prompt, size_t n) {
  lm.reset(0);
  const std::vector<float> last = lm.prefill(0, prompt);
  Tokens t;
  t.ids.push_back(argmax(last));
  t.logprobs.push_back(0); // not compared: a prefill's row, not a pick
  while (t.ids.size() < n) {
    const StepRow r{.slot = 0, .ids = std::span(&t.ids.back(), 1)};
    lm.queue_step(std::span(&r, 1));
    const StepResult res = lm.next_result();
    t.ids.push_back(res.ids[0]);
    t.logprobs.push_back(res.logprobs[0]);
  }
  return t;
}

// One sequence of a batch driven by speculative rounds.
struct Running {
  size_t request = 0;
  int32_t slot = 0;
  Tokens got;
  bool first = true; // its next input is the prefill's pick, known on the host only
};

// What spec_batch may do besides: give every row its next input (the host's copy of its last
// pick), so no round continues from the last one's head rows; and record each round row's
// accepted count, in order, and the rounds whose every row continues a round.
struct RoundLog {
  bool give_ids = false;
  std::vector<int32_t> accepted;
  int64_t continuing_rounds = 0;
};

// The requests through `lm` in rounds over `slots` slots: request i joins when a slot is free
// and it has waited `i` rounds at least (so sequences join mid-run), leaves once it has `n[i]`
// tokens. Returns each request's tokens and counts the accepted drafts per round row.
std::vector<Tokens> spec_batch(CausalLM& lm, const std::vector<std::vector<int32_t>>& prompts,
                               const std::vector<size_t>& n, int32_t slots, std::vector<int64_t>* accepted_hist,
                               RoundLog* log = nullptr) {
  std::vector<Tokens> out(prompts.size());
  std::vector<Running> running;
  size_t next = 0, round = 0;
  std::vector<bool> busy(static_cast<size_t>(slots), false);
  while (next < prompts.size() || !running.empty()) {
    for (int32_t s = 0; s < slots && next < prompts.size() && next <= round; ++s) {
      if (busy[static_cast<size_t>(s)]) continue;
      busy[static_cast<size_t>(s)] = true;
      Running r{next, s, {}, true};
      lm.reset(s);
      r.got.ids.push_back(argmax(lm.prefill(s, prompts[next])));
      r.got.logprobs.push_back(0);
      running.push_back(std::move(r));
      ++next;
    }
    std::vector<SpecRow> rows;
    bool continuing = true;
    for (Running& r : running) {
      rows.push_back({.slot = r.slot});
      if (r.first || (log && log->give_ids)) rows.back().id = r.got.ids.back();
      continuing = continuing && !r.first;
      r.first = false;
    }
    if (log) log->continuing_rounds += continuing;
    lm.queue_spec_round(rows);
    const StepResult res = lm.next_result();
    const size_t D = res.ids.size() / rows.size();
    for (size_t i = 0; i < running.size(); ++i) {
      Running& r = running[i];
      const int32_t a = res.accepted.at(i);
      if (accepted_hist) ++(*accepted_hist)[static_cast<size_t>(a)];
      if (log) log->accepted.push_back(a);
      for (int32_t j = 0; j <= a && r.got.ids.size() < n[r.request]; ++j) {
        r.got.ids.push_back(res.ids[i * D + static_cast<size_t>(j)]);
        r.got.logprobs.push_back(res.logprobs[i * D + static_cast<size_t>(j)]);
      }
    }
    for (auto it = running.begin(); it != running.end();) {
      if (it->got.ids.size() < n[it->request]) {
        ++it;
        continue;
      }
      out[it->request] = std::move(it->got);
      busy[static_cast<size_t>(it->slot)] = false;
      it = running.erase(it);
    }
    ++round;
  }
  return out;
}

// Six prompts: the fixture's cases and prefixes of them.
std::vector<std::vector<int32_t>> prompts_of(const Fixture& fx) {
  std::vector<std::vector<int32_t>> p;
  for (const FixtureCase& c : fx.cases) p.push_back(c.prompt);
  for (const FixtureCase& c : fx.cases)
    if (c.prompt.size() > 3) p.emplace_back(c.prompt.begin(), c.prompt.begin() + static_cast<long>(c.prompt.size() / 2));
  while (p.size() < 6) p.push_back({p[p.size() % 2].begin(), p[p.size() % 2].begin() + 2});
  p.resize(6);
  return p;
}

std::string histogram(const std::vector<int64_t>& h) {
  std::string s;
  for (size_t i = 0; i < h.size(); ++i) s += fmt::format("{}{}", i ? " " : "", h[i]);
  return s;
}

} // namespace

// Every request of a batch gets, token for token and log-probability for log-probability, what
// greedy decode alone gives it: K = 1..5, one to four slots, requests joining while others run
// and leaving at different lengths, so rows with different acceptance lengths share rounds.
// A verification pass runs the ops of a decode step (the fused Gated DeltaNet step walks its
// tokens), so any difference is the rounds' doing (a wrong draft accepted, a state settled on
// the wrong row, KV read past a sequence's length), never rounding.
TEST(Speculation, GreedyRoundsGiveGreedyDecodeBitForBit) {
  TempDir tmp;
  const Checkpoint tiny = Checkpoint::open(with_random_mtp("tiny-qwen3_5", tmp));
  const Fixture tiny_fx = Fixture::load("tiny-qwen3_5"), demo = Fixture::load(kDemo);
  struct Model {
    const char* name;
    const Checkpoint& ck;
    std::vector<std::vector<int32_t>> prompts;
  };
  for (const Model& m : {Model{"demo", demo.checkpoint, prompts_of(demo)}, Model{"tiny-qwen3_5 + random head", tiny, prompts_of(tiny_fx)}}) {
    Backend plain_be = cpu_model_backend();
    auto plain = load(m.ck, plain_be, 1, 0);
    const std::vector<size_t> n{40, 23, 31, 17, 36, 28};
    std::vector<Tokens> want;
    for (size_t i = 0; i < m.prompts.size(); ++i) want.push_back(plain_greedy(*plain, m.prompts[i], n[i]));
    for (int32_t K = 1; K <= kMostDraftTokens; ++K)
      for (int32_t slots : {1, 2, 4}) {
        Backend be = cpu_model_backend();
        auto spec = load(m.ck, be, slots, K);
        std::vector<int64_t> hist(static_cast<size_t>(K) + 1, 0);
        const std::vector<Tokens> got = spec_batch(*spec, m.prompts, n, slots, &hist);
        for (size_t i = 0; i < want.size(); ++i) {
          Tokens g = got[i], w = want[i];
          g.logprobs[0] = w.logprobs[0] = 0;
          EXPECT_TRUE(g == w) << m.name << " K " << K << " slots " << slots << " request " << i
                              << ": ids differ or a log-probability's bits do";
        }
        std::printf("%s K %d slots %d: rows by accepted drafts %s\n", m.name, K, slots, histogram(hist).c_str());
        if (m.name == std::string("demo")) EXPECT_GT(hist.back(), 0) << "K " << K << ": no round accepted every draft";
      }
  }
}

namespace {

// The demo model's prompts, the tokens each request generates, and plain greedy decode's output
// for each: what the speculative runs below must reproduce. None of them picks id 0
// (<|endoftext|>), which the tests use as a draft the model never accepts.
struct DemoGreedy {
  Fixture demo = Fixture::load(kDemo);
  std::vector<std::vector<int32_t>> prompts = prompts_of(demo);
  std::vector<size_t> n{40, 23, 31, 17, 36, 28};
  std::vector<Tokens> want;
  int32_t vocab = 0;
  DemoGreedy() {
    Backend be = cpu_model_backend();
    auto plain = load(demo.checkpoint, be, 1, 0);
    vocab = static_cast<int32_t>(plain->vocab_size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      want.push_back(plain_greedy(*plain, prompts[i], n[i]));
      EXPECT_EQ(std::count(want.back().ids.begin(), want.back().ids.end(), 0), 0) << "request " << i << " picks id 0";
    }
  }
  // Every request's tokens and log-probabilities are greedy decode's, bit for bit (the first
  // token's log-probability, a prefill's row, aside).
  void expect_greedy(const std::vector<Tokens>& got, const std::string& what) const {
    for (size_t i = 0; i < want.size(); ++i) {
      Tokens g = got[i], w = want[i];
      g.logprobs[0] = w.logprobs[0] = 0;
      EXPECT_TRUE(g == w) << what << " request " << i << ": ids differ or a log-probability's bits do";
    }
  }
};

// Mean drafts accepted per round row of an accepted-count histogram.
double mean_accepted(const std::vector<int64_t>& hist) {
  int64_t rows = 0, accepted = 0;
  for (size_t a = 0; a < hist.size(); ++a) rows += hist[a], accepted += static_cast<int64_t>(a) * hist[a];
  return static_cast<double>(accepted) / static_cast<double>(rows);
}

} // namespace

// Rounds that verify only (ninfer-bench --spec-verify-only: no MTP head pass) on the demo model,
// three drafts, two slots: every output is still greedy decode's, bit for bit, and no round
// accepts a draft, because the drafts verified are the table's initial id 0, not the head's: a
// head pass would have drafted tokens the model accepts (GreedyRoundsGiveGreedyDecodeBitForBit).
TEST(Speculation, RoundsThatVerifyOnlyStillGiveGreedyDecode) {
  const DemoGreedy g;
  ASSERT_FALSE(HasFailure());
  Backend be = cpu_model_backend();
  auto spec = load(g.demo.checkpoint, be, 2, 3);
  spec->set_verify_only_rounds(true);
  std::vector<int64_t> hist(4, 0);
  g.expect_greedy(spec_batch(*spec, g.prompts, g.n, 2, &hist), "verify-only");
  EXPECT_GT(hist[0], 0);
  EXPECT_EQ(hist[1] + hist[2] + hist[3], 0) << "a round that verifies only accepted drafts: " << histogram(hist);
}

// The drafter restricted to token ids below N (Speculation::draft_vocab) on the demo model, three
// drafts, two slots: N = the vocabulary accepts what the unrestricted head accepts, row for row;
// N = 1 drafts only id 0 (<|endoftext|>), which greedy decode of these prompts never picks, so no
// draft is ever accepted; N = a quarter of the vocabulary keeps most of the acceptance (the low
// ids of a BPE vocabulary are its common tokens). Every output stays greedy decode's, bit for bit.
TEST(Speculation, AShorterDraftVocabularyChangesOnlyWhatIsAccepted) {
  const DemoGreedy d;
  ASSERT_FALSE(HasFailure());
  const auto& [demo, prompts, n, want, V] = d;
  constexpr int32_t K = 3, kSlots = 2;
  // Mean drafts accepted per round row, and the histogram, for a draft vocabulary.
  const auto run = [&](int32_t draft_vocab, std::vector<int64_t>& hist) {
    Backend be = cpu_model_backend();
    auto spec = load(demo.checkpoint, be, kSlots, K, 512, draft_vocab);
    hist.assign(K + 1, 0);
    d.expect_greedy(spec_batch(*spec, prompts, n, kSlots, &hist), fmt::format("draft_vocab {}", draft_vocab));
    return mean_accepted(hist);
  };
  std::vector<int64_t> all, whole, one, quarter;
  const double a_all = run(0, all), a_whole = run(V, whole), a_one = run(1, one), a_quarter = run(V / 4, quarter);
  EXPECT_EQ(whole, all) << "draft_vocab = the vocabulary is the unrestricted drafter";
  EXPECT_EQ(a_one, 0.0) << "drafts of id 0 accepted: " << histogram(one);
  // The quarter keeps at least this share of the whole vocabulary's acceptance.
  constexpr double kQuarterKeeps = 0.8;
  EXPECT_GE(a_quarter, kQuarterKeeps * a_all) << histogram(quarter) << " vs " << histogram(all);
  EXPECT_GT(a_all, 0.0);
  std::printf("drafts accepted per row: all %.3f (%s), ids < %d %.3f (%s)\n", a_all, histogram(all).c_str(), V / 4,
              a_quarter, histogram(quarter).c_str());
}

// A round whose rows all continue a round drafts its first tokens from the head row the last
// round's catch-up kept, instead of running the head again (Decoder's chained rounds). Demo
// model, three drafts, two slots: the same requests with every round given its inputs by the
// host (which makes every round run its first draft pass) accept exactly the same drafts, row
// for row, so the kept rows are what the first pass computes; and the chained run calls mtp.fc
// once less in each of its continuing rounds, so the pass really was left out.
TEST(Speculation, ChainedRoundsDraftWhatTheirFirstPassWould) {
  const DemoGreedy d;
  ASSERT_FALSE(HasFailure());
  constexpr int32_t K = 3, kSlots = 2;
  struct FcCalls : LinearObserver {
    int64_t calls = 0;
    bool wants(std::span<const std::string> modules) override {
      return modules.size() == 1 && modules[0] == "mtp.fc";
    }
    void observe(const LinearInput&) override { ++calls; }
  };
  const auto run = [&](bool give_ids, RoundLog& log, int64_t& fc_calls) {
    Backend be = cpu_model_backend();
    auto spec = load(d.demo.checkpoint, be, kSlots, K);
    FcCalls fc;
    ObservedLinears watch(be, fc);
    log.give_ids = give_ids;
    d.expect_greedy(spec_batch(*spec, d.prompts, d.n, kSlots, nullptr, &log), give_ids ? "inputs given" : "chained");
    fc_calls = fc.calls;
  };
  RoundLog chained, fresh;
  int64_t chained_fc = 0, fresh_fc = 0;
  run(false, chained, chained_fc);
  run(true, fresh, fresh_fc);
  EXPECT_EQ(chained.accepted, fresh.accepted) << "a chained round drafted other tokens than its first pass would";
  ASSERT_GT(chained.continuing_rounds, 0);
  EXPECT_EQ(fresh_fc - chained_fc, chained.continuing_rounds)
      << "head passes (mtp.fc calls): " << chained_fc << " chained, " << fresh_fc << " with inputs given";
}

// The drafter's LM head rows in int4 (Speculation::draft_head), demo model, three drafts, two
// slots, the whole vocabulary and its first half: every output stays greedy decode's, bit for
// bit, and the drafts keep most of the acceptance of the model's own rows (quantized rows in a
// wrong order or with wrong scales would draft noise, which the model almost never accepts).
TEST(Speculation, AnInt4DraftHeadKeepsTheOutputAndMostOfTheAcceptance) {
  const DemoGreedy d;
  ASSERT_FALSE(HasFailure());
  constexpr int32_t K = 3, kSlots = 2;
  // The int4 rows keep at least this share of the model rows' mean accepted drafts.
  constexpr double kInt4Keeps = 0.9;
  const auto run = [&](int32_t draft_vocab, DraftHead head) {
    Backend be = cpu_model_backend();
    auto spec = load(d.demo.checkpoint, be, kSlots, K, 512, draft_vocab, head);
    std::vector<int64_t> hist(K + 1, 0);
    d.expect_greedy(spec_batch(*spec, d.prompts, d.n, kSlots, &hist),
                    fmt::format("{} draft_vocab {}", to_string(head), draft_vocab));
    return mean_accepted(hist);
  };
  for (int32_t draft_vocab : {0, d.vocab / 2}) {
    const double model_rows = run(draft_vocab, DraftHead::LmHead), int4 = run(draft_vocab, DraftHead::Int4);
    EXPECT_GT(model_rows, 0.0);
    EXPECT_GE(int4, kInt4Keeps * model_rows) << "draft_vocab " << draft_vocab;
    std::printf("draft_vocab %d: drafts accepted per row %.3f (LM head), %.3f (int4 rows)\n", draft_vocab, model_rows,
                int4);
  }
}

namespace {

// Sampled decode: the prompt but its last token prefilled, then one step per token, each picked
// by the sample op with draw numbers 0, 1, 2, ... of `p`.
Tokens plain_sampled(CausalLM& lm, const std::vector<int32_t>& prompt, RowSampling p, size_t n) {
  lm.reset(0);
  lm.prefill(0, std::span(prompt.data(), prompt.size() - 1));
  Tokens t;
  int32_t in = prompt.back();
  for (uint64_t draw = 0; t.ids.size() < n; ++draw) {
    p.draw = draw;
    const StepRow r{.slot = 0, .ids = std::span(&in, 1), .sampling = p};
    lm.queue_step(std::span(&r, 1));
    const StepResult res = lm.next_result();
    in = res.ids[0];
    t.ids.push_back(res.ids[0]);
    t.logprobs.push_back(res.logprobs[0]);
  }
  return t;
}

// The same through rounds: the first token from the same step (draw 0), then rounds whose rows
// take the next draws, as many per round as tokens it kept.
Tokens spec_sampled(CausalLM& lm, const std::vector<int32_t>& prompt, RowSampling p, size_t n, int64_t& accepted) {
  lm.reset(0);
  lm.prefill(0, std::span(prompt.data(), prompt.size() - 1));
  p.draw = 0;
  const StepRow first{.slot = 0, .ids = std::span(&prompt.back(), 1), .sampling = p};
  lm.queue_step(std::span(&first, 1));
  const StepResult r0 = lm.next_result();
  Tokens t{{r0.ids[0]}, {r0.logprobs[0]}};
  uint64_t draw = 1;
  while (t.ids.size() < n) {
    p.draw = draw;
    const SpecRow row{.slot = 0, .sampling = p}; // fed by the last pick on the backend
    lm.queue_spec_round(std::span(&row, 1));
    const StepResult r = lm.next_result();
    accepted += r.accepted[0];
    for (int32_t j = 0; j <= r.accepted[0] && t.ids.size() < n; ++j) {
      t.ids.push_back(r.ids[static_cast<size_t>(j)]);
      t.logprobs.push_back(r.logprobs[static_cast<size_t>(j)]);
    }
    draw += static_cast<uint64_t>(r.accepted[0]) + 1;
  }
  return t;
}

} // namespace

// Speculative sampling: a row's pick after each verified position is the sample op's with the
// sequence's next draw numbers, and a draft is kept while it equals the pick. So sampled rounds
// draw, token for token and log-probability for log-probability, what sampled decode draws with
// the same seed (every filter of the sample op; K = 1..5).
TEST(Speculation, SampledRoundsDrawWhatSampledDecodeDraws) {
  const Fixture demo = Fixture::load(kDemo);
  Backend plain_be = cpu_model_backend();
  auto plain = load(demo.checkpoint, plain_be, 1, 0);
  const std::vector<RowSampling> settings{{.temperature = 0.7, .seed = 3},
                                          {.temperature = 1.0, .top_k = 20, .seed = 4},
                                          {.temperature = 0.9, .top_p = 0.8, .seed = 5},
                                          {.temperature = 1.2, .min_p = 0.05, .seed = 6}};
  for (int32_t K = 1; K <= kMostDraftTokens; ++K) {
    Backend be = cpu_model_backend();
    auto spec = load(demo.checkpoint, be, 1, K);
    int64_t accepted = 0;
    for (size_t i = 0; i < settings.size(); ++i) {
      const std::vector<int32_t>& prompt = demo.cases[i % demo.cases.size()].prompt;
      const Tokens want = plain_sampled(*plain, prompt, settings[i], 40);
      const Tokens got = spec_sampled(*spec, prompt, settings[i], 40, accepted);
      EXPECT_TRUE(got == want) << "K " << K << " settings " << i;
    }
    EXPECT_GT(accepted, 0) << "K " << K << ": no sampled draft was accepted";
  }
}

// After rounds that accepted some drafts and rejected others, a model is where plain decode of
// the same tokens leaves it: the next token's logits and the head's draft logits (its KV cache
// and the slot's last hidden state) are the same bits. Both models are loaded for speculation;
// one only decodes.
TEST(Speculation, RoundsLeaveTheStateOfPlainDecode) {
  const Fixture demo = Fixture::load(kDemo);
  for (int32_t K : {2, 5}) {
    Backend plain_be = cpu_model_backend(), spec_be = cpu_model_backend();
    auto plain = load(demo.checkpoint, plain_be, 1, K), spec = load(demo.checkpoint, spec_be, 1, K);
    const std::vector<int32_t>& prompt = demo.cases[0].prompt;
    std::vector<int32_t> ids{argmax(spec->prefill(0, prompt))};
    plain->prefill(0, prompt);
    int64_t accepted = 0, rejected = 0;
    for (int round = 0; round < 12; ++round) {
      SpecRow r{.slot = 0};
      if (round == 0) r.id = ids.back();
      spec->queue_spec_round(std::span(&r, 1));
      const StepResult res = spec->next_result();
      accepted += res.accepted[0];
      rejected += res.accepted[0] < K;
      for (int32_t j = 0; j <= res.accepted[0]; ++j) ids.push_back(res.ids[static_cast<size_t>(j)]);
    }
    ASSERT_GT(accepted, 0) << "K " << K;
    ASSERT_GT(rejected, 0) << "K " << K;
    // Plain decode feeds the same tokens (all but the last: the slot's next input).
    for (size_t i = 0; plain->position(0) < spec->position(0); ++i) {
      const StepRow s{.slot = 0, .ids = std::span(&ids[i], 1)};
      plain->queue_step(std::span(&s, 1));
      plain->next_result();
    }
    ASSERT_EQ(plain->position(0), spec->position(0));
    const int32_t next = ids.back();
    const std::vector<float> a = plain->prefill(0, std::span(&next, 1)), b = spec->prefill(0, std::span(&next, 1));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0) << "K " << K << ": the model's logits";
    const std::vector<float> da = plain->last_step_draft_logits(0, 1), db = spec->last_step_draft_logits(0, 1);
    EXPECT_EQ(std::memcmp(da.data(), db.data(), sizeof(float) * da.size()), 0) << "K " << K << ": the head's logits";
  }
}

// The demo head's first draft after each held-out token (three State of the Union addresses the
// training never saw, tests/models/data/README.md) equals the model's own next argmax as often
// as its training measured: a wrong head forward (halves swapped, a position off, a norm's
// scale) falls far below.
TEST(Speculation, DemoHeadAgreesWithTheModelAsTrained) {
  const Fixture demo = Fixture::load(kDemo);
  const Tokenizer tok = Tokenizer::load(source_dir() / kDemo / "tokenizer.json");
  std::ifstream in(source_dir() / "tests/models/data/sotu_heldout.txt");
  std::string line;
  int64_t agree = 0, total = 0;
  Backend be = cpu_model_backend();
  ModelOptions o;
  o.max_context = 1024;
  o.prefill_chunk = 1024;
  o.speculation = {SpecMethod::Mtp, 1};
  auto lm = CausalLM::load(demo.checkpoint, be, o);
  const auto V = static_cast<size_t>(lm->vocab_size());
  while (std::getline(in, line)) {
    const std::vector<int32_t> ids = tok.encode(line);
    ASSERT_GT(ids.size(), 100u);
    lm->reset(0);
    const std::vector<float> model = lm->prefill(0, ids, LogitsFor::All);
    const std::vector<float> head = lm->last_step_draft_logits(1, static_cast<int64_t>(ids.size()) - 1);
    // Head row p - 1 drafts the token after token p; model row p predicts the same token.
    for (size_t p = 1; p + 1 < ids.size(); ++p) {
      const std::span<const float> m(model.data() + p * V, V), h(head.data() + (p - 1) * V, V);
      agree += std::max_element(m.begin(), m.end()) - m.begin() == std::max_element(h.begin(), h.end()) - h.begin();
      ++total;
    }
  }
  ASSERT_GT(total, 800);
  const double agreement = static_cast<double>(agree) / static_cast<double>(total);
  std::printf("demo head: first draft = the model's next argmax on %lld of %lld held-out tokens (%.3f; trained "
              "%.3f)\n",
              static_cast<long long>(agree), static_cast<long long>(total), agreement, kDemoTrainedAgreement);
  EXPECT_NEAR(agreement, kDemoTrainedAgreement, kDemoAgreementTolerance);
}

// Forced accepted counts (ninfer-bench --spec-acceptance) replace only what a round keeps: forced
// to the counts the verification finds itself, rounds give the very ids and log-probabilities of
// unforced rounds; forced to other counts, every row reports and advances by its forced count.
TEST(Speculation, ForcedAcceptanceKeepsTheForcedCounts) {
  const Fixture demo = Fixture::load(kDemo);
  constexpr int32_t K = 3, kRounds = 6;
  auto run = [&](const std::vector<std::vector<int32_t>>& forced, std::vector<std::vector<int32_t>>* counts,
                 std::vector<int64_t>* positions) {
    Backend be = cpu_model_backend();
    auto lm = load(demo.checkpoint, be, 2, K);
    std::vector<SpecRow> rows;
    for (int32_t s = 0; s < 2; ++s) {
      rows.push_back({.slot = s, .id = argmax(lm->prefill(s, demo.cases[static_cast<size_t>(s)].prompt))});
    }
    Tokens got;
    for (int32_t round = 0; round < kRounds; ++round) {
      for (size_t i = 0; i < rows.size(); ++i) {
        if (!forced.empty()) rows[i].forced_accept = forced[static_cast<size_t>(round)][i];
      }
      lm->queue_spec_round(rows);
      const StepResult res = lm->next_result();
      got.ids.insert(got.ids.end(), res.ids.begin(), res.ids.end());
      got.logprobs.insert(got.logprobs.end(), res.logprobs.begin(), res.logprobs.end());
      if (counts) counts->push_back(res.accepted);
      if (positions) positions->push_back(lm->position(0) * 1000 + lm->position(1));
      for (SpecRow& r : rows) r.id.reset();
    }
    return got;
  };
  std::vector<std::vector<int32_t>> natural;
  const Tokens unforced = run({}, &natural, nullptr);
  int64_t natural_accepted = 0;
  for (const auto& c : natural) natural_accepted += c[0] + c[1];
  ASSERT_GT(natural_accepted, 0) << "the demo head accepted nothing: the comparison below would be weak";
  EXPECT_TRUE(run(natural, nullptr, nullptr) == unforced) << "forcing the natural counts changed the rounds";

  const std::vector<std::vector<int32_t>> chosen{{3, 0}, {0, 3}, {1, 2}, {2, 1}, {3, 3}, {0, 0}};
  std::vector<std::vector<int32_t>> reported;
  std::vector<int64_t> positions;
  run(chosen, &reported, &positions);
  EXPECT_EQ(reported, chosen);
  std::vector<int64_t> p0{static_cast<int64_t>(demo.cases[0].prompt.size()),
                          static_cast<int64_t>(demo.cases[1].prompt.size())};
  for (int32_t round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < 2; ++i) p0[i] += chosen[static_cast<size_t>(round)][i] + 1;
    EXPECT_EQ(positions[static_cast<size_t>(round)], p0[0] * 1000 + p0[1]) << "round " << round;
  }

  Backend be = cpu_model_backend();
  auto lm = load(demo.checkpoint, be, 2, K);
  for (int32_t s = 0; s < 2; ++s) lm->prefill(s, demo.cases[0].prompt);
  std::vector<SpecRow> mixed{{.slot = 0, .id = 5, .forced_accept = 1}, {.slot = 1, .id = 5}};
  EXPECT_THROW(lm->queue_spec_round(mixed), Error) << "one row forced, one not";
  for (int32_t bad : {-1, K + 1}) {
    const SpecRow r{.slot = 0, .id = 5, .forced_accept = bad};
    EXPECT_THROW(lm->queue_spec_round(std::span(&r, 1)), Error) << "forced count " << bad;
  }
}

// What speculation cannot do is an error naming the problem, and leaves the model usable.
TEST(Speculation, RefusesWhatItCannotRun) {
  const Fixture tiny = Fixture::load("tiny-qwen3_5"), demo = Fixture::load(kDemo);
  Backend be = cpu_model_backend(); // loads that fail allocate nothing
  try {
    load(tiny.checkpoint, be, 1, 3);
    ADD_FAILURE() << "a checkpoint without an MTP head loaded for speculation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtp_num_hidden_layers"), std::string::npos) << e.what();
  }
  for (int32_t K : {0, kMostDraftTokens + 1}) {
    ModelOptions o;
    o.max_context = 256;
    o.speculation = {SpecMethod::Mtp, K};
    EXPECT_THROW(CausalLM::load(demo.checkpoint, be, o), Error) << "K " << K;
  }
  ModelOptions no_method;
  no_method.max_context = 256;
  no_method.speculation.draft_tokens = 2;
  EXPECT_THROW(CausalLM::load(demo.checkpoint, be, no_method), Error);
  no_method.speculation = {SpecMethod::None, 0, 100};
  EXPECT_THROW(CausalLM::load(demo.checkpoint, be, no_method), Error) << "a draft vocabulary without speculation";
  for (const int32_t N : {-1, static_cast<int32_t>(demo.checkpoint.config().vocab_size) + 1}) {
    ModelOptions o;
    o.max_context = 256;
    o.speculation = {SpecMethod::Mtp, 2, N};
    EXPECT_THROW(CausalLM::load(demo.checkpoint, be, o), Error) << "draft_vocab " << N;
  }

  Backend plain_be = cpu_model_backend();
  auto plain = load(demo.checkpoint, plain_be, 1, 0);
  const SpecRow row{.slot = 0, .id = 5};
  plain->prefill(0, demo.cases[0].prompt);
  EXPECT_THROW(plain->queue_spec_round(std::span(&row, 1)), Error) << "no speculation loaded";
  Backend truncate_be = cpu_model_backend();
  EXPECT_FALSE(load(demo.checkpoint, truncate_be, 1, 2)->can_truncate());

  Backend be2 = cpu_model_backend();
  auto lm = load(demo.checkpoint, be2, 2, 3, 64);
  EXPECT_THROW(lm->queue_spec_round(std::span(&row, 1)), Error) << "nothing prefilled";
  const std::vector<int32_t> prompt(61, 11);
  lm->prefill(0, prompt);
  EXPECT_THROW(lm->queue_spec_round(std::span(&row, 1)), Error) << "61 + 4 positions exceed the context of 64";
  lm->reset(0);
  lm->prefill(0, demo.cases[0].prompt);
  const SpecRow chained{.slot = 0};
  EXPECT_THROW(lm->queue_spec_round(std::span(&chained, 1)), Error) << "no next input on the backend";
  const SpecRow twice[] = {row, row};
  EXPECT_THROW(lm->queue_spec_round(twice), Error);
  const SpecRow bad{.slot = 0, .id = static_cast<int32_t>(lm->vocab_size())};
  EXPECT_THROW(lm->queue_spec_round(std::span(&bad, 1)), Error);
  lm->queue_spec_round(std::span(&row, 1));
  const int32_t id = 3;
  const StepRow step{.slot = 0, .ids = std::span(&id, 1)};
  EXPECT_THROW(lm->queue_step(std::span(&step, 1)), Error) << "its round is not read";
  EXPECT_THROW(lm->queue_spec_round(std::span(&chained, 1)), Error) << "its round is not read";
  const int64_t before = lm->position(0);
  const StepResult r = lm->next_result();
  EXPECT_EQ(lm->position(0), before + r.accepted[0] + 1);
  lm->queue_spec_round(std::span(&chained, 1)); // usable: chained from the round's own pick
  lm->next_result();
}
