// ObservedLinears (ninfer/models/linear_observer.hpp) on the fixtures: every projection of a
// prefill and a decode step reports its input rows once, keyed by the modules that read them
// (stacked ones together); the rows are what the layer computes (layer 0's attention input
// against rms_norm of the embedding rows in float64); observing changes no logit; a declined
// call is never reported; one observer per backend.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <random>

#include "model_test_env.hpp"
#include "ninfer/models/linear_observer.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// The normed rows are float32 arithmetic on float32 weights; the oracle is float64.
constexpr Tolerance kNormedRows{"rms-norm-float32-vs-float64", 1e-5, 1e-4};

struct Call {
  std::vector<std::string> modules;
  int64_t tokens = 0, cols = 0;
  std::vector<float> rows;
};

struct Recorder : LinearObserver {
  std::vector<Call> calls;
  std::function<bool(std::span<const std::string>)> want = [](auto) { return true; };
  int declined = 0;
  bool wants(std::span<const std::string> modules) override {
    const bool w = want(modules);
    declined += !w;
    return w;
  }
  void observe(const LinearInput& in) override {
    calls.push_back({{in.modules.begin(), in.modules.end()}, in.tokens, in.cols,
                     {in.rows, in.rows + in.tokens * in.cols}});
  }
};

ModelOptions options() {
  ModelOptions o;
  o.max_context = 64;
  o.weights = WeightPrecision::F32;
  o.kv_cache = KvCachePrecision::F32;
  return o;
}

std::vector<int32_t> prompt(int64_t vocab, int n) {
  auto rng = fresh_rng("LinearObserver prompt");
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& v : ids) v = id(rng);
  return ids;
}

std::string layer(const ModelConfig& cfg, int64_t i) { return fmt::format("{}layers.{}.", cfg.weight_prefix, i); }

// The modules each layer kind must report, with their input features.
std::vector<std::pair<std::vector<std::string>, int64_t>> expected_calls(const ModelConfig& cfg, int64_t i) {
  const std::string p = layer(cfg, i);
  std::vector<std::pair<std::vector<std::string>, int64_t>> out;
  if (cfg.layer_types[static_cast<size_t>(i)] == LayerKind::FullAttention) {
    out.push_back({{p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"}, cfg.hidden_size});
    out.push_back({{p + "self_attn.o_proj"}, cfg.num_attention_heads * cfg.head_dim});
  } else {
    out.push_back({{p + "linear_attn.in_proj_qkv", p + "linear_attn.in_proj_z", p + "linear_attn.in_proj_a",
                    p + "linear_attn.in_proj_b"},
                   cfg.hidden_size});
    out.push_back({{p + "linear_attn.out_proj"}, -1}); // the value width
  }
  out.push_back({{p + "mlp.gate_proj", p + "mlp.up_proj"}, cfg.hidden_size});
  out.push_back({{p + "mlp.down_proj"}, cfg.intermediate_size});
  return out;
}

class LinearObserverTest : public testing::TestWithParam<const char*> {};

TEST_P(LinearObserverTest, ReportsEveryProjectionOnceWithItsRows) {
  const Checkpoint ck = Checkpoint::open(fixtures_dir() / GetParam());
  const ModelConfig& cfg = ck.config();
  Backend be = cpu_model_backend();
  auto lm = CausalLM::load(ck, be, options());
  const std::vector<int32_t> ids = prompt(cfg.vocab_size, 9);
  const std::vector<float> plain = lm->prefill(0, ids, LogitsFor::All);
  lm->reset(0);

  Recorder rec;
  std::vector<float> observed;
  {
    ObservedLinears watch(be, rec);
    observed = lm->prefill(0, ids, LogitsFor::All);
  }
  EXPECT_EQ(observed, plain) << "observing changed the logits";

  // Layer by layer in order, then lm_head (the fixtures' lm_head is untied).
  size_t at = 0;
  for (int64_t i = 0; i < cfg.num_layers; ++i)
    for (const auto& [modules, cols] : expected_calls(cfg, i)) {
      ASSERT_LT(at, rec.calls.size());
      const Call& c = rec.calls[at++];
      EXPECT_EQ(c.modules, modules) << "call " << at - 1;
      EXPECT_EQ(c.tokens, static_cast<int64_t>(ids.size()));
      if (cols > 0) EXPECT_EQ(c.cols, cols) << modules.front();
      EXPECT_EQ(c.rows.size(), static_cast<size_t>(c.tokens * c.cols));
    }
  ASSERT_LT(at, rec.calls.size());
  EXPECT_EQ(rec.calls[at].modules, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(rec.calls[at].cols, cfg.hidden_size);
  int64_t head_rows = 0;
  for (; at < rec.calls.size(); ++at) {
    EXPECT_EQ(rec.calls[at].modules, std::vector<std::string>{"lm_head"});
    head_rows += rec.calls[at].tokens;
  }
  EXPECT_EQ(head_rows, static_cast<int64_t>(ids.size())) << "lm_head sees every row of LogitsFor::All";

  // Layer 0's first input: rms_norm(embedding rows) · w, in float64 from the checkpoint.
  const std::vector<float> table = to_f32(ck.tensor(cfg.weight_prefix + "embed_tokens.weight"));
  const std::vector<float> w = to_f32(ck.tensor(layer(cfg, 0) + "input_layernorm.weight"));
  const int64_t H = cfg.hidden_size;
  std::vector<double> want;
  for (int32_t id : ids) {
    const float* e = table.data() + static_cast<size_t>(id) * H;
    double ss = 0;
    for (int64_t j = 0; j < H; ++j) ss += double(e[j]) * e[j];
    const double inv = 1.0 / std::sqrt(ss / H + cfg.rms_norm_eps);
    for (int64_t j = 0; j < H; ++j)
      want.push_back(double(e[j]) * inv * (cfg.norm_weight_offset ? 1.0 + w[j] : double(w[j])));
  }
  const Mismatch mm = compare(rec.calls.front().rows, want, kNormedRows);
  EXPECT_TRUE(mm.ok) << mm.describe();
}

TEST_P(LinearObserverTest, DecodeStepsReportOneRowAndDeclinedCallsAreNotCopied) {
  const Checkpoint ck = Checkpoint::open(fixtures_dir() / GetParam());
  const ModelConfig& cfg = ck.config();
  Backend be = cpu_model_backend();
  auto lm = CausalLM::load(ck, be, options());
  const std::vector<int32_t> ids = prompt(cfg.vocab_size, 5);
  Recorder rec;
  const std::string down = layer(cfg, cfg.num_layers - 1) + "mlp.down_proj";
  rec.want = [&](std::span<const std::string> m) { return m.size() == 1 && m.front() == down; };
  {
    ObservedLinears watch(be, rec);
    (void)lm->prefill(0, ids);
    (void)decode_logits(*lm, std::vector<int32_t>{0}, std::vector<int32_t>{ids.front()});
    EXPECT_THROW(ObservedLinears(be, rec), Error) << "a second observer on one backend";
  }
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_EQ(rec.calls[0].tokens, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(rec.calls[1].tokens, 1);
  EXPECT_EQ(rec.calls[1].cols, cfg.intermediate_size);
  EXPECT_GT(rec.declined, 0);
  // Gone with its ObservedLinears.
  (void)decode_logits(*lm, std::vector<int32_t>{0}, std::vector<int32_t>{ids.front()});
  EXPECT_EQ(rec.calls.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LinearObserverTest, testing::Values("tiny-qwen3", "tiny-qwen3_5"),
                         [](const testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (auto& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

} // namespace
