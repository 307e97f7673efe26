// The memory plan (ninfer/models/memory_plan.hpp) against real loads on the CPU plugin and
// against sizes derived here from config.json alone: the parts a load allocates, the KV bytes
// per token and the state per sequence, the context chosen for a budget, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "model_test_env.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/models/memory_plan.hpp"
#include "ninfer/models/mixed_chunk.hpp"

namespace ninfer::test {
namespace {

// Every part of a load is planned exactly: the plan and the load share their code, so any
// difference at all is a bug.
constexpr size_t kExactBytes = 0;

// Independent sizes, from config.json's keys and the storage rules of docs/memory.md.
size_t kv_bytes_per_token(const ModelConfig& c, size_t element) {
  return static_cast<size_t>(c.num_layers_of(LayerKind::FullAttention)) * 2 * c.num_key_value_heads * c.head_dim *
         element;
}

size_t state_bytes_per_sequence(const ModelConfig& c) {
  const int64_t conv_channels = 2 * c.linear_num_key_heads * c.linear_key_head_dim +
                                c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t conv = conv_channels * (c.linear_conv_kernel_dim - 1);
  const int64_t recurrent = c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
  return static_cast<size_t>(c.num_layers_of(LayerKind::LinearAttention) * (conv + recurrent) * 4);
}

// A synthetic checkpoint's weights as loaded: embedding and projections in its dtype (or
// quantized: int4 codes two per byte, one bf16 scale per group), every other tensor in float32,
// and Gated DeltaNet's in_proj_a / in_proj_b a second time in float32 (the prompt's gating
// projection reads them apart from the stacked decode projection).
size_t synthetic_weight_bytes(const ModelConfig& c, size_t element, const std::map<std::string, SyntheticQuant>& quant) {
  size_t bytes = 0;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const bool matrix = t.role == TensorRole::Embedding || t.role == TensorRole::Linear;
    if (const auto q = quant.find(t.name); q != quant.end()) {
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const int64_t groups = (cols + q->second.group_size - 1) / q->second.group_size;
      bytes += static_cast<size_t>(rows * ((cols + 1) / 2) + rows * groups * 2);
    } else {
      bytes += static_cast<size_t>(n) * (matrix ? element : 4);
    }
    if (t.name.ends_with("linear_attn.in_proj_a.weight") || t.name.ends_with("linear_attn.in_proj_b.weight"))
      bytes += static_cast<size_t>(n) * 4;
  }
  return bytes;
}

// Every MLP projection of a preset quantized to int4 in groups of 32.
std::map<std::string, SyntheticQuant> int4_mlp(const ModelConfig& c) {
  std::map<std::string, SyntheticQuant> q;
  for (const ExpectedTensor& t : expected_tensors(c))
    if (t.name.find(".mlp.") != std::string::npos) q.emplace(t.name, SyntheticQuant{QuantCodes::Int4, 32});
  return q;
}

ModelOptions options(int64_t max_context, int32_t sequences) {
  ModelOptions o;
  o.max_context = max_context;
  o.max_sequences = sequences;
  o.prefill_chunk = 64;
  return o;
}

// The load's MemoryReport equals its plan part by part, and its weights by format.
void expect_plan_is_the_load(const Checkpoint& ck, const ModelOptions& o, const std::string& what) {
  Backend be = cpu_model_backend();
  const auto lm = CausalLM::load(ck, be, o);
  const MemoryPlan& plan = lm->memory_plan();
  const MemoryReport got = be.memory();
  for (size_t u = 0; u < got.in_use.size(); ++u)
    EXPECT_EQ(plan.parts.exact[u], got.in_use[u] + kExactBytes)
        << what << ": " << memory_use_name(static_cast<MemoryUse>(u)) << "\n" << plan.text();
  EXPECT_EQ(plan.parts.allocated(), got.total) << what;
  EXPECT_EQ(plan.parts.weights_by_format, got.weights_by_format) << what;
  EXPECT_EQ(plan.options.max_context, lm->options().max_context) << what;
  EXPECT_EQ(plan.parts.allocator, allocator_overhead(got, NINFER_DEVICE_CPU)) << what;
  EXPECT_EQ(plan.parts.cuda_graphs + plan.parts.cuda_runtime, 0u) << what << ": no CUDA estimate on the CPU";
}

} // namespace

TEST(MemoryPlan, EqualsTheLoadOfEveryFixture) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5", "tiny-qwen3_5-long", "tiny-qwen3_5-vl-layout",
                           "quant/tiny-qwen3-awq/quantized", "quant/tiny-qwen3-fp8/quantized",
                           "quant/tiny-qwen3-gptq4/quantized", "quant/tiny-qwen3_5-ct-w4/quantized",
                           "quant/tiny-qwen3_5-gptq4-actorder/quantized"}) {
    const Checkpoint ck = Checkpoint::open(fixtures_dir() / name);
    expect_plan_is_the_load(ck, options(512, 2), name);
    const ModelConfig& c = ck.config();
    ModelOptions f16 = options(300, 3);
    f16.kv_cache = KvCachePrecision::F16;
    Backend be = cpu_model_backend();
    const MemoryPlan p = plan_memory(ck, plan_target(be), f16, {});
    EXPECT_EQ(p.kv_bytes_per_token, kv_bytes_per_token(c, 2)) << name;
    // Each slot's 300 positions in whole KV blocks (docs/memory.md, "The KV block pool").
    const size_t blocks = (300 + kKvBlockTokens - 1) / kKvBlockTokens;
    EXPECT_EQ(p.parts.of(MemoryUse::KvCache), kv_bytes_per_token(c, 2) * blocks * kKvBlockTokens * 3) << name;
    EXPECT_EQ(p.state_bytes_per_sequence, state_bytes_per_sequence(c)) << name;
    EXPECT_EQ(p.parts.of(MemoryUse::State), state_bytes_per_sequence(c) * 3) << name;
  }
}

// A mixed step holds a prompt chunk and a row for every other slot: mixed_chunk 16 at 8 slots
// takes the activations of 23 rows, as prefill_chunk 23 does with no chunk beside decoding
// rows, and the load allocates what its plan says; an unset chunk is the cost rule's, planned and
// loaded alike.
TEST(MemoryPlan, MixedStepsSizeTheActivations) {
  const Checkpoint ck = Checkpoint::open(fixtures_dir() / "tiny-qwen3_5");
  ModelOptions mixed = options(256, 8);
  mixed.prefill_chunk = 16;
  mixed.mixed_chunk = 16;
  ModelOptions long_chunk = options(256, 8);
  long_chunk.prefill_chunk = 23;
  long_chunk.mixed_chunk = 1;
  ModelOptions short_chunk = long_chunk;
  short_chunk.prefill_chunk = 16;
  Backend be = cpu_model_backend();
  const auto activations = [&](const ModelOptions& o) {
    return plan_memory(ck, plan_target(be), o, {}).parts.of(MemoryUse::Activations);
  };
  EXPECT_EQ(activations(mixed), activations(long_chunk));
  EXPECT_GT(activations(mixed), activations(short_chunk));
  expect_plan_is_the_load(ck, mixed, "mixed_chunk 16 at 8 slots");
  ModelOptions rule = options(256, 4);
  const MemoryPlan p = plan_memory(ck, plan_target(be), rule, {});
  EXPECT_GE(p.options.mixed_chunk, std::min(kMinMixedChunk, rule.prefill_chunk));
  EXPECT_LE(p.options.mixed_chunk, rule.prefill_chunk);
  Backend load_be = cpu_model_backend();
  EXPECT_EQ(CausalLM::load(ck, load_be, rule)->options().mixed_chunk, p.options.mixed_chunk);
}

// The random presets' shapes, loaded with a vocabulary of 2,048 rows (their 151,936 would make
// each load draw 39M embedding values on the CPU; the plan's own check of the weights below
// takes the whole shape).
TEST(MemoryPlan, EqualsTheLoadOfRandomPresetsAndItsWeightsFollowTheConfig) {
  constexpr int64_t kLoadedVocab = 2048;
  for (const auto& preset : random_checkpoint_presets()) {
    const ModelConfig c = shape_preset_config(preset.name);
    ModelConfig small = c;
    small.vocab_size = kLoadedVocab;
    for (const auto& [dtype, element] : {std::pair{DType::F32, size_t{4}}, std::pair{DType::BF16, size_t{2}}})
      for (const bool quantized : {false, true}) {
        const std::string what = preset.name + (dtype == DType::F32 ? " f32" : " bf16") + (quantized ? " int4" : "");
        if (dtype == DType::F32 && quantized == false)
          expect_plan_is_the_load(Checkpoint::synthetic(small, dtype, 7), options(256, 2), what);
        if (dtype == DType::BF16 && quantized)
          expect_plan_is_the_load(Checkpoint::synthetic(small, dtype, 7, int4_mlp(small)), options(256, 2), what);
        const auto quant = quantized ? int4_mlp(c) : std::map<std::string, SyntheticQuant>{};
        const Checkpoint ck = Checkpoint::synthetic(c, dtype, 7, quant);
        Backend be = cpu_model_backend();
        const MemoryPlan p = plan_memory(ck, plan_target(be), options(1024, 4), {});
        EXPECT_EQ(p.parts.of(MemoryUse::Weights), synthetic_weight_bytes(c, element, quant)) << what;
        EXPECT_EQ(p.kv_bytes_per_token, kv_bytes_per_token(c, 4)) << what << ": float32 on the CPU plugin";
        EXPECT_EQ(p.state_bytes_per_sequence, state_bytes_per_sequence(c)) << what;
      }
  }
}

// Speculation with the MTP head: the plan equals the load, and against the plan without it adds
// exactly the head's weights (its matrices as the checkpoint stores them, bfloat16 here; norms
// in float32), its attention layer's KV per token, and per sequence the model's last hidden state
// and next input plus the Gated DeltaNet state of each of the K + 1 verified positions.
TEST(MemoryPlan, CountsTheMtpHeadAndTheVerifiedStatesWhenSpeculating) {
  const Checkpoint ck = Checkpoint::open(source_dir() / "models/qwen3_5-demo");
  const ModelConfig& c = ck.config();
  constexpr int32_t kDrafts = 3;
  ModelOptions spec = options(512, 2);
  spec.speculation = {SpecMethod::Mtp, kDrafts};
  expect_plan_is_the_load(ck, spec, "demo, speculation");
  Backend be = cpu_model_backend();
  const MemoryPlan with = plan_memory(ck, plan_target(be), spec, {});
  const MemoryPlan without = plan_memory(ck, plan_target(be), options(512, 2), {});
  size_t head = 0;
  for (const ExpectedTensor& t : mtp_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    head += static_cast<size_t>(n) * (t.role == TensorRole::Linear ? 2 : 4);
  }
  EXPECT_EQ(with.parts.of(MemoryUse::Weights) - without.parts.of(MemoryUse::Weights), head);
  EXPECT_EQ(with.kv_bytes_per_token - without.kv_bytes_per_token,
            static_cast<size_t>(2 * c.num_key_value_heads * c.head_dim * 4));
  // Per slot: its last hidden state, the head's first draft row and its next input, and the
  // recurrent states after each of a round's K + 1 tokens.
  EXPECT_EQ(with.state_bytes_per_sequence - without.state_bytes_per_sequence,
            static_cast<size_t>(2 * c.hidden_size * 4 + 4) + (kDrafts + 1) * state_bytes_per_sequence(c));
}

// The drafter's int4 LM head rows (Speculation::draft_head) are weights of their own: per row,
// its codes (two per byte) and a bfloat16 scale per group of 128 columns (one group where 128
// does not divide them), for the draft vocabulary's rows only.
TEST(MemoryPlan, CountsTheInt4DraftHeadRows) {
  const Checkpoint ck = Checkpoint::open(source_dir() / "models/qwen3_5-demo");
  const ModelConfig& c = ck.config();
  Backend be = cpu_model_backend();
  for (int32_t draft_vocab : {0, 1000}) {
    ModelOptions lm_rows = options(512, 2), int4_rows = options(512, 2);
    lm_rows.speculation = {SpecMethod::Mtp, 3, draft_vocab};
    int4_rows.speculation = {SpecMethod::Mtp, 3, draft_vocab, 0, DraftHead::Int4};
    expect_plan_is_the_load(ck, int4_rows, "demo, int4 drafter rows");
    const MemoryPlan a = plan_memory(ck, plan_target(be), lm_rows, {}), b = plan_memory(ck, plan_target(be), int4_rows, {});
    const int64_t rows = draft_vocab ? draft_vocab : c.vocab_size, K = c.hidden_size;
    const int64_t groups = K % 128 == 0 ? K / 128 : 1;
    EXPECT_EQ(b.parts.of(MemoryUse::Weights) - a.parts.of(MemoryUse::Weights),
              static_cast<size_t>(rows * ((K + 1) / 2 + 2 * groups)))
        << "draft_vocab " << draft_vocab;
  }
}

// With no max_context, the plan takes the longest context the budget holds at the asked
// concurrency: what the room left after the other parts holds, rounded down to 256 tokens.
TEST(MemoryPlan, AutomaticContextIsTheLongestThatFitsTheLimit) {
  ModelConfig shape = shape_preset_config("qwen3_5-cpu-small");
  shape.vocab_size = 2048; // a quick load; the context depends on the room left, not on the vocabulary
  const Checkpoint ck = Checkpoint::synthetic(shape, DType::F32, 1);
  const ModelConfig& c = ck.config();
  Backend probe = cpu_model_backend();
  const size_t per_token = kv_bytes_per_token(c, 4);
  const MemoryPlan at_1k = plan_memory(ck, plan_target(probe), options(1024, 4), {});
  const size_t others = at_1k.parts.total() - at_1k.parts.of(MemoryUse::KvCache);
  // Room for 4 x 3000 tokens and a little: 4 x 2816 after rounding down to 256.
  const size_t limit = others + per_token * 4 * 3000 + 1000;
  BackendOptions bo;
  bo.memory_limit = limit;
  Backend be(*model_test_plugins().find("cpu"), host_device(), bo);
  const auto lm = CausalLM::load(ck, be, options(0, 4));
  EXPECT_EQ(lm->options().max_context, 2816) << lm->memory_plan().text();
  EXPECT_EQ(lm->memory_plan().kv_tokens_fit, static_cast<int64_t>((limit - others) / per_token))
      << lm->memory_plan().text();
  EXPECT_LE(be.memory().total, limit);

  // A budget beyond the model's positions: the positions.
  const MemoryPlan roomy = plan_memory(ck, plan_target(probe), options(0, 1), {});
  EXPECT_EQ(roomy.options.max_context, c.max_position_embeddings);
  EXPECT_EQ(roomy.kv_tokens_fit, -1);

}

// An asked KV capacity is one pool the sequences share: the automatic context is as long as the
// whole pool (rounded down to 256), the pool is the capacity in whole blocks, not slots x
// context, and a load makes exactly that many blocks. A capacity below one sequence's context
// is refused with the numbers.
TEST(MemoryPlan, AKvCapacityIsAPoolTheSequencesShare) {
  ModelConfig shape = shape_preset_config("qwen3_5-cpu-small");
  shape.vocab_size = 2048;
  const Checkpoint ck = Checkpoint::synthetic(shape, DType::F32, 1);
  Backend probe = cpu_model_backend();
  ModelOptions cap = options(0, 4);
  cap.kv_capacity = 4000;
  const MemoryPlan capped = plan_memory(ck, plan_target(probe), cap, {});
  ASSERT_TRUE(capped.fits()) << capped.problem;
  EXPECT_EQ(capped.options.max_context, 3840) << capped.text();
  EXPECT_EQ(capped.kv_tokens, 4000 / kKvBlockTokens * kKvBlockTokens) << capped.text();
  EXPECT_EQ(capped.parts.of(MemoryUse::KvCache), static_cast<size_t>(capped.kv_tokens) * capped.kv_bytes_per_token);

  Backend be = cpu_model_backend();
  const auto lm = CausalLM::load(ck, be, cap);
  EXPECT_EQ(lm->kv_blocks_total(), 4000 / kKvBlockTokens);
  EXPECT_EQ(be.memory().in_use[static_cast<size_t>(MemoryUse::KvCache)], capped.parts.of(MemoryUse::KvCache));

  // A capacity beyond slots x context is the pool (room for the prefix cache's blocks).
  ModelOptions roomy = options(512, 2);
  roomy.kv_capacity = 3 * 512 + 100;
  EXPECT_EQ(plan_memory(ck, plan_target(probe), roomy, {}).kv_tokens, 3 * 512 + 64);

  ModelOptions small = options(1000, 2);
  small.kv_capacity = 1000; // one sequence of 1000 takes 16 blocks of 64: 1024 tokens
  const MemoryPlan refused = plan_memory(ck, plan_target(probe), small, {});
  EXPECT_FALSE(refused.fits());
  EXPECT_NE(refused.problem.find("a KV capacity of 1000 tokens is less than one sequence of max_context 1000 needs "
                                 "(1024 tokens"),
            std::string::npos)
      << refused.problem;
}

TEST(MemoryPlan, RefusesWhatDoesNotFitWithTheNumbers) {
  const Checkpoint ck = Checkpoint::synthetic(shape_preset_config("qwen3-cpu-small"), DType::F32, 1);
  Backend probe = cpu_model_backend();
  const MemoryPlan p = plan_memory(ck, plan_target(probe), options(4096, 2), {});
  const size_t others = p.parts.total() - p.parts.of(MemoryUse::KvCache);

  // A given context beyond the limit: refused before anything is allocated, with what fits.
  BackendOptions bo;
  bo.memory_limit = others + p.kv_bytes_per_token * 2 * 1000;
  Backend be(*model_test_plugins().find("cpu"), host_device(), bo);
  ModelOptions o = options(4096, 2);
  const std::string msg = error_of([&] { CausalLM::load(ck, be, o); });
  for (const char* want : {"does not fit", "max_context 4096 x max_concurrency 2", "8192 tokens", "do not fit: 2000 tokens",
                           "the longest context that fits is 768", "weights", "kv-cache", "the limit of"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << "\n" << msg;
  EXPECT_EQ(be.memory().total, 0u) << "nothing is allocated before the plan fits";

  // Weights alone beyond the limit.
  BackendOptions tiny;
  tiny.memory_limit = p.parts.of(MemoryUse::Weights) / 2;
  Backend small(*model_test_plugins().find("cpu"), host_device(), tiny);
  const std::string none = error_of([&] { CausalLM::load(ck, small, options(0, 1)); });
  EXPECT_NE(none.find("does not fit even without its KV cache"), std::string::npos) << none;

  // An automatic context under 256 tokens per sequence.
  const MemoryPlan at_8 = plan_memory(ck, plan_target(probe), options(100, 8), {});
  BackendOptions tight;
  tight.memory_limit = at_8.parts.total() - at_8.parts.of(MemoryUse::KvCache) + p.kv_bytes_per_token * 8 * 100;
  Backend t(*model_test_plugins().find("cpu"), host_device(), tight);
  const std::string few = error_of([&] { CausalLM::load(ck, t, options(0, 8)); });
  EXPECT_NE(few.find("at max_concurrency 8 only 100 tokens per sequence fit"), std::string::npos) << few;

  // A KV capacity beyond what fits.
  ModelOptions cap = options(0, 1);
  cap.kv_capacity = 1 << 20;
  const std::string capacity = error_of([&] { CausalLM::load(ck, be, cap); });
  EXPECT_NE(capacity.find("a KV capacity of 1048576 tokens"), std::string::npos) << capacity;
}

// The backend's allocator holds to its limit too: an allocation beyond it names the limit.
TEST(MemoryPlan, BackendRefusesAnAllocationBeyondItsLimit) {
  BackendOptions bo;
  bo.memory_limit = size_t{1} << 20;
  Backend be(*model_test_plugins().find("cpu"), host_device(), bo);
  DeviceBuffer a = be.allocate(size_t{768} << 10, MemoryUse::Activations, "first");
  const std::string msg = error_of([&] { be.allocate(size_t{512} << 10, MemoryUse::Activations, "second"); });
  EXPECT_NE(msg.find("memory limit of 1.0 MiB (1048576 bytes)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("second"), std::string::npos) << msg;
}

// A dry run holds no memory, launches nothing and still reserves what a load's steps need.
TEST(MemoryPlan, DryRunBackendCountsWithoutHolding) {
  BackendOptions bo;
  bo.plan_only = true;
  Backend be(*model_test_plugins().find("cpu"), host_device(), bo);
  DeviceBuffer a = be.allocate(size_t{1} << 40, MemoryUse::KvCache, "a terabyte that is never there");
  DeviceBuffer b = be.allocate(100, MemoryUse::Weights, "a small one");
  EXPECT_NE(a.data(), b.data());
  be.zero(a, 0, a.bytes());
  EXPECT_EQ(be.memory().total, (size_t{1} << 40) + 100);
  EXPECT_EQ(be.memory().allocation_sizes.size(), 2u);
}

} // namespace ninfer::test
