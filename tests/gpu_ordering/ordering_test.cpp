// Programmatic dependent launch lets an op's kernel start while the kernel before it on the
// stream still runs; what the op reads before its launch wait must be what that kernel cannot be
// writing (common/grid_dependency.cuh; the Ordering paragraphs of attention.h, gated_delta_step.h,
// head_norm_rope.h, token_batch.h). Each test puts a kernel of its own right before the op: it
// lets the op launch at once, waits 200 us, then writes the op's inputs that the previous kernel
// of a real step writes (this call's KV rows, the projection rows, the conv's outputs). The op
// must give bit for bit what it gives when those inputs were in place before it launched; a
// read ahead of the wait would see the stale bytes, which a third run shows do change the result.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../gpu_ops/gpu_op_env.hpp"
#include "attention_layer_case.hpp"
#include "kv_blocks.hpp"
#include "late_copy.hpp"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr long long kDelayNs = 200'000; // far longer than any op here takes to reach its wait

// Skips unless the device has programmatic dependent launch (compute capability 9.0 or newer).
#define NINFER_REQUIRE_PDL_DEVICE(be)                                                            \
  do {                                                                                           \
    if ((be).device().cc_major < 9) GTEST_SKIP() << "no programmatic dependent launch before sm_90"; \
  } while (0)

void late_copy(Backend& be, const LateCopies& c) {
  ASSERT_EQ(0, launch_late_copy(be.stream(), c, kDelayNs)) << "the late writer failed to launch";
}

// The late writer with one range: `count` floats of `from` over `to`.
void late_copy(Backend& be, const DeviceBuffer& from, DeviceBuffer& to, size_t count) {
  LateCopies c;
  c.range[c.count++] = {from.data(), to.data(), static_cast<int64_t>(count * sizeof(float))};
  late_copy(be, c);
}

using Seq = SeqSpan;
using Batch = HostTokenBatch;
struct DeviceBatch {
  DeviceBuffer ss, sl, tp, ts;
  ninfer_token_batch batch;
  DeviceBatch(Backend& be, const Batch& b)
      : ss(put(be, b.seq_start)), sl(put(be, b.seq_slot)), tp(put(be, b.token_pos)), ts(put(be, b.token_seq)),
        batch{static_cast<int32_t>(b.seq_slot.size()), ss.as<int32_t>(), sl.as<int32_t>(), tp.as<int32_t>(),
              ts.as<int32_t>()} {}
};

// Random bfloat16 values (no NaN or infinity, which could hide a difference).
std::vector<uint16_t> bf16_values(std::mt19937_64& rng, size_t n) {
  std::vector<uint16_t> out;
  out.reserve(n);
  for (float f : randn(rng, n)) out.push_back(to_bf16(f));
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---- attention (split-KV decode) ------------------------------------------------------------
// Qwen3-8B's layout on a bfloat16 cache (the tensor-core decode): one decode token early in a
// sequence, one at 4,100 keys (split into chunks), and a prompt chunk batched with a decode
// token. The writer puts this call's K and V rows (every token's position) into the cache.
constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kSlots = 2, kCapacity = 4160;
constexpr int64_t kPosElems = int64_t{kKvHeads} * kHeadDim; // one position's row, every kv head

TEST(GpuOrdering, AttentionSeesThisCallsKvRowsWrittenByTheKernelBeforeIt) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  NINFER_REQUIRE_PDL_DEVICE(*gpu);
  auto rng = fresh_rng("gpu ordering: attention");
  const size_t cache_elems = static_cast<size_t>(kSlots) * kCapacity * kPosElems;
  for (const auto& seqs : std::vector<std::vector<Seq>>{{{0, 37, 1}}, {{1, 4100, 1}}, {{1, 961, 40}, {0, 37, 1}}}) {
    const Batch b(seqs);
    const int64_t T = b.tokens();
    const std::string what = std::to_string(seqs.size()) + " sequences, " + std::to_string(T) + " tokens, last at " +
                             std::to_string(b.token_pos.back());
    const std::vector<uint16_t> k_true = bf16_values(rng, cache_elems), v_true = bf16_values(rng, cache_elems);
    // Stale: this call's rows hold other values.
    std::vector<uint16_t> k_stale = k_true, v_stale = v_true;
    for (const Seq& s : seqs) {
      const size_t at = (static_cast<size_t>(s.slot) * kCapacity + s.pos0) * kPosElems, n = s.n * kPosElems;
      const auto k_other = bf16_values(rng, n), v_other = bf16_values(rng, n);
      std::copy(k_other.begin(), k_other.end(), k_stale.begin() + static_cast<std::ptrdiff_t>(at));
      std::copy(v_other.begin(), v_other.end(), v_stale.begin() + static_cast<std::ptrdiff_t>(at));
    }
    const std::vector<float> q = randn(rng, static_cast<size_t>(T) * kHeads * kHeadDim);
    DeviceBatch db(*gpu, b);
    DeviceBuffer qd = put(*gpu, q), kt = put(*gpu, k_true), vt = put(*gpu, v_true);
    // The identity table (64-token blocks): the late copies below address the cache contiguously.
    const KvBlockLayout blocks = KvBlockLayout::identity(kSlots, kCapacity, 64);
    DeviceBuffer table = put(*gpu, blocks.table);
    const ninfer_shape shape{T, {kHeadDim, kHeads, kKvHeads, b.token_pos.back() + 1}, NINFER_DTYPE_BF16};
    gpu->reserve_workspace(NINFER_OP_ATTENTION, shape);

    // late: nullptr, the cache is `k`/`v` as uploaded; else the writer copies this call's rows
    // from the true cache first.
    auto run = [&](const std::vector<uint16_t>& k, const std::vector<uint16_t>& v, bool late) {
      DeviceBuffer kc = put(*gpu, k), vc = put(*gpu, v), out = poisoned_buffer(*gpu, q.size());
      ninfer_kv_cache cache{};
      cache.k = kc.data(), cache.v = vc.data(), cache.kv_heads = kKvHeads, cache.head_dim = kHeadDim;
      cache.dtype = NINFER_DTYPE_BF16;
      blocks.attach(cache, table.as<int32_t>());
      ninfer_attention_args a{qd.as<float>(), kHeads * kHeadDim, kHeadDim, cache, db.batch, out.as<float>(),
                              kHeads * kHeadDim, T, kHeads, 0.08838834764831845f};
      if (late) {
        LateCopies c;
        for (const Seq& s : seqs) {
          const size_t at = (static_cast<size_t>(s.slot) * kCapacity + s.pos0) * kPosElems * sizeof(uint16_t);
          const int64_t bytes = s.n * kPosElems * static_cast<int64_t>(sizeof(uint16_t));
          c.range[c.count++] = {static_cast<const char*>(kt.data()) + at, static_cast<char*>(kc.data()) + at, bytes};
          c.range[c.count++] = {static_cast<const char*>(vt.data()) + at, static_cast<char*>(vc.data()) + at, bytes};
        }
        late_copy(*gpu, c);
      }
      gpu->run(NINFER_OP_ATTENTION, shape, &a);
      return get<float>(*gpu, out, q.size());
    };
    const std::vector<float> want = run(k_true, v_true, false);
    const std::vector<float> got = run(k_stale, v_stale, true);
    const std::vector<float> stale = run(k_stale, v_stale, false);
    EXPECT_TRUE(same_bits(got, want)) << what << ": the attention read a row before the kernel that wrote it was done";
    EXPECT_FALSE(same_bits(stale, want)) << what << ": the stale rows do not change the result; the test shows nothing";
  }
}

// ---- gated_delta_step -----------------------------------------------------------------------
// Qwen3.5-27B's layer (48 value heads, 16 key heads of 128), three sequences. The writer puts
// the conv's and the projections' outputs (q, k, v, z, a, b) in place; the state is the op's own.
TEST(GpuOrdering, GatedDeltaStepSeesInputsWrittenByTheKernelBeforeIt) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  NINFER_REQUIRE_PDL_DEVICE(*gpu);
  auto rng = fresh_rng("gpu ordering: gated_delta_step");
  constexpr int32_t Hv = 48, Hk = 16, D = 128, slots = 4;
  const Batch b({{2, 9, 1}, {0, 30, 1}, {3, 4, 1}});
  const int64_t T = b.tokens();
  // One buffer of inputs: q, k [T][Hk][D], v, z [T][Hv][D], a, b [T][Hv].
  const int64_t qk = T * Hk * D, vz = T * Hv * D, ab = T * Hv;
  const std::vector<float> in_true = randn(rng, static_cast<size_t>(2 * qk + 2 * vz + 2 * ab), 0.5f);
  const std::vector<float> in_stale = randn(rng, in_true.size(), 0.5f);
  const std::vector<float> state0 = randn(rng, static_cast<size_t>(slots) * Hv * D * D, 0.1f);
  const std::vector<float> a_log = randn(rng, Hv, 0.5f), dt_bias = randn(rng, Hv, 0.5f), norm_w = randn(rng, D);
  DeviceBatch db(*gpu, b);
  DeviceBuffer truth = put(*gpu, in_true), al = put(*gpu, a_log), dt = put(*gpu, dt_bias), nw = put(*gpu, norm_w);
  const ninfer_shape shape{T, {Hv, D, D, Hk}, NINFER_DTYPE_F32};

  struct Result {
    std::vector<float> out, state;
  };
  auto run = [&](const std::vector<float>& inputs, bool late) {
    DeviceBuffer in = put(*gpu, inputs), st = put(*gpu, state0), out = poisoned_buffer(*gpu, static_cast<size_t>(vz));
    const float* x = in.as<float>();
    ninfer_gated_delta_step_args a{};
    a.q = x, a.k = x + qk, a.qk_token_stride = Hk * D;
    a.v = x + 2 * qk, a.v_token_stride = Hv * D, a.z = x + 2 * qk + vz, a.z_token_stride = Hv * D;
    a.a = x + 2 * qk + 2 * vz, a.b = a.a + ab, a.ab_token_stride = Hv;
    a.a_log = al.as<float>(), a.dt_bias = dt.as<float>(), a.norm_w = nw.as<float>(), a.eps = 1e-6f;
    a.scale = 0.08838834764831845f, a.state = st.as<float>(), a.out = out.as<float>(), a.out_token_stride = Hv * D;
    a.batch = db.batch, a.tokens = T, a.k_heads = Hk, a.v_heads = Hv, a.k_dim = D, a.v_dim = D;
    if (late) late_copy(*gpu, truth, in, inputs.size());
    gpu->run(NINFER_OP_GATED_DELTA_STEP, shape, &a);
    return Result{get<float>(*gpu, out, static_cast<size_t>(vz)), get<float>(*gpu, st, state0.size())};
  };
  const Result want = run(in_true, false), got = run(in_stale, true), stale = run(in_stale, false);
  EXPECT_TRUE(same_bits(got.out, want.out)) << "the step read an input before the kernel that wrote it was done";
  EXPECT_TRUE(same_bits(got.state, want.state)) << "the state differs";
  EXPECT_FALSE(same_bits(stale.out, want.out)) << "the stale inputs do not change the result; the test shows nothing";
}

// ---- head_norm_rope_append ------------------------------------------------------------------
// Qwen3-8B's layer on a bfloat16 cache, a decode token batched with a prompt chunk. The writer
// puts the projection rows (q, k, v) in place, as the fused q|k|v projection does in a step.
TEST(GpuOrdering, HeadNormRopeAppendSeesProjectionRowsWrittenByTheKernelBeforeIt) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  NINFER_REQUIRE_PDL_DEVICE(*gpu);
  auto rng = fresh_rng("gpu ordering: head_norm_rope_append");
  constexpr int32_t capacity = 64;
  const Batch b({{1, 20, 1}, {0, 3, 9}});
  const int64_t T = b.tokens(), stride = int64_t{kHeads + 2 * kKvHeads} * kHeadDim;
  const std::vector<float> proj_true = randn(rng, static_cast<size_t>(T * stride)),
                           proj_stale = randn(rng, proj_true.size());
  const std::vector<float> wq = randn(rng, kHeadDim, 0.3f), wk = randn(rng, kHeadDim, 0.3f);
  const std::vector<uint16_t> cache0 = bf16_values(rng, static_cast<size_t>(kSlots) * capacity * kPosElems);
  DeviceBatch db(*gpu, b);
  DeviceBuffer truth = put(*gpu, proj_true), wqd = put(*gpu, wq), wkd = put(*gpu, wk);
  const KvBlockLayout blocks = KvBlockLayout::identity(kSlots, capacity, 16); // the cache, contiguous
  DeviceBuffer table = put(*gpu, blocks.table);
  const ninfer_shape shape{T, {kHeadDim, kHeads, kKvHeads, kHeadDim}, NINFER_DTYPE_BF16};

  struct Result {
    std::vector<float> proj;
    std::vector<uint16_t> k, v;
  };
  auto run = [&](const std::vector<float>& proj, bool late) {
    DeviceBuffer p = put(*gpu, proj), kc = put(*gpu, cache0), vc = put(*gpu, cache0);
    float* x = p.as<float>();
    float* k = x + int64_t{kHeads} * kHeadDim;
    ninfer_head_norm_rope_append_args a{};
    a.rope = {x, stride, kHeadDim, k, stride, kHeadDim, wqd.as<float>(), wkd.as<float>(), db.batch.token_pos,
              T, kHeads, kKvHeads, kHeadDim, kHeadDim, 1e-6f, 0, 1e6};
    ninfer_kv_cache cache{};
    cache.k = kc.data(), cache.v = vc.data(), cache.kv_heads = kKvHeads, cache.head_dim = kHeadDim;
    cache.dtype = NINFER_DTYPE_BF16;
    blocks.attach(cache, table.as<int32_t>());
    a.append = {k, stride, k + kPosElems, stride, cache, db.batch, T};
    if (late) late_copy(*gpu, truth, p, proj.size());
    gpu->run(NINFER_OP_HEAD_NORM_ROPE_APPEND, shape, &a);
    return Result{get<float>(*gpu, p, proj.size()), get<uint16_t>(*gpu, kc, cache0.size()),
                  get<uint16_t>(*gpu, vc, cache0.size())};
  };
  const Result want = run(proj_true, false), got = run(proj_stale, true), stale = run(proj_stale, false);
  EXPECT_TRUE(same_bits(got.proj, want.proj)) << "q/k rows: a row was read before the kernel that wrote it was done";
  EXPECT_TRUE(same_bits(got.k, want.k)) << "K cache";
  EXPECT_TRUE(same_bits(got.v, want.v)) << "V cache";
  EXPECT_FALSE(same_bits(stale.k, want.k)) << "the stale rows do not change the result; the test shows nothing";
}

// ---- head_norm_rope_append_attention --------------------------------------------------------
// Qwen3-8B's layer on a bfloat16 cache, two decode tokens (one at 4,100 keys). The writer puts
// the projection rows in place; the op reads the cache before each token's position early.
TEST(GpuOrdering, HeadNormRopeAppendAttentionSeesProjectionRowsWrittenByTheKernelBeforeIt) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  NINFER_REQUIRE_PDL_DEVICE(*gpu);
  auto rng = fresh_rng("gpu ordering: head_norm_rope_append_attention");
  const Batch b({{1, 4100, 1}, {0, 37, 1}});
  const int64_t T = b.tokens(), stride = int64_t{kHeads + 2 * kKvHeads} * kHeadDim;
  const std::vector<float> proj_true = randn(rng, static_cast<size_t>(T * stride)),
                           proj_stale = randn(rng, proj_true.size());
  const std::vector<float> wq = randn(rng, kHeadDim, 0.3f), wk = randn(rng, kHeadDim, 0.3f);
  const size_t cache_elems = static_cast<size_t>(kSlots) * kCapacity * kPosElems;
  const std::vector<uint16_t> k0 = bf16_values(rng, cache_elems), v0 = bf16_values(rng, cache_elems);
  DeviceBatch db(*gpu, b);
  DeviceBuffer truth = put(*gpu, proj_true), wqd = put(*gpu, wq), wkd = put(*gpu, wk);
  const KvBlockLayout blocks = KvBlockLayout::identity(kSlots, kCapacity, 64);
  DeviceBuffer table = put(*gpu, blocks.table);
  const ninfer_shape shape{T, {kHeadDim, kHeads, kKvHeads, 4101}, NINFER_DTYPE_BF16};
  gpu->reserve_workspace(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape);

  struct Result {
    std::vector<float> out;
    std::vector<uint16_t> k, v;
  };
  auto run = [&](const std::vector<float>& proj, bool late) {
    DeviceBuffer p = put(*gpu, proj), kc = put(*gpu, k0), vc = put(*gpu, v0);
    DeviceBuffer out = poisoned_buffer(*gpu, static_cast<size_t>(T) * kHeads * kHeadDim);
    float* x = p.as<float>();
    float* k = x + int64_t{kHeads} * kHeadDim;
    ninfer_kv_cache cache{};
    cache.k = kc.data(), cache.v = vc.data(), cache.kv_heads = kKvHeads, cache.head_dim = kHeadDim;
    cache.dtype = NINFER_DTYPE_BF16;
    blocks.attach(cache, table.as<int32_t>());
    ninfer_head_norm_rope_append_attention_args a{};
    a.prep.rope = {x, stride, kHeadDim, k, stride, kHeadDim, wqd.as<float>(), wkd.as<float>(), db.batch.token_pos,
                   T, kHeads, kKvHeads, kHeadDim, kHeadDim, 1e-6f, 0, 1e6};
    a.prep.append = {k, stride, k + kPosElems, stride, cache, db.batch, T};
    a.attn = {x, stride, kHeadDim, cache, db.batch, out.as<float>(), kHeads * kHeadDim, T, kHeads,
              0.08838834764831845f};
    if (late) late_copy(*gpu, truth, p, proj.size());
    gpu->run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape, &a);
    return Result{get<float>(*gpu, out, static_cast<size_t>(T) * kHeads * kHeadDim),
                  get<uint16_t>(*gpu, kc, cache_elems), get<uint16_t>(*gpu, vc, cache_elems)};
  };
  const Result want = run(proj_true, false), got = run(proj_stale, true), stale = run(proj_stale, false);
  EXPECT_TRUE(same_bits(got.out, want.out)) << "a projection row was read before the kernel that wrote it was done";
  EXPECT_TRUE(same_bits(got.k, want.k)) << "K cache";
  EXPECT_TRUE(same_bits(got.v, want.v)) << "V cache";
  EXPECT_FALSE(same_bits(stale.out, want.out)) << "the stale rows do not change the result; the test shows nothing";
}

} // namespace
