// Two CUDA backends decoding at the same time (two models in one process, as the graph-replay
// tests run an eager and a recorded copy side by side): each backend launches on its own stream,
// so their split-key decode launches overlap on the device, and the chunks of each must still
// meet only among themselves (ninfer_launch.tickets: a set of merge tickets per backend). Every
// output of the interleaved launches is compared bit for bit with the same call run alone (the
// merge order is the chunk order, so a correct launch is deterministic); a merge that ran before
// all its chunks had written, or never ran, leaves different bits or the NaN the output was
// poisoned with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_common.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "op_routes.hpp"
#include "ninfer/abi/ops/attention.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int32_t kHeadDim = 128, kHeads = 32, kKvHeads = 8; // Qwen3-8B's attention
constexpr int32_t kSlots = 6, kSpan = 3000;
// Launches of each backend, each into its own output rows: enough that the two streams' CTAs
// share the device many times over.
constexpr int kLaunches = 48;

// One backend's copy of the cache, queries and outputs, and the call's arguments for launch i.
struct DecodeOn {
  DeviceBuffer k, v, table, q, out;
  BatchOn batch;
  ninfer_attention_args args;
  int64_t out_floats;

  DecodeOn(Backend& be, const KvBlockLayout& blocks, const std::vector<uint16_t>& kv_k,
           const std::vector<uint16_t>& kv_v, const Batch& b, const std::vector<float>& queries)
      : k(put(be, kv_k, "K cache")), v(put(be, kv_v, "V cache")), table(put(be, blocks.table, "KV block table")),
        q(put(be, queries)), out(poisoned_buffer(be, static_cast<size_t>(kLaunches) * b.tokens() * kHeads * kHeadDim)),
        batch(be, b), out_floats(b.tokens() * kHeads * kHeadDim) {
    ninfer_kv_cache c{};
    c.k = k.data();
    c.v = v.data();
    c.kv_heads = kKvHeads;
    c.head_dim = kHeadDim;
    c.dtype = NINFER_DTYPE_BF16;
    blocks.attach(c, table.as<int32_t>());
    args = {q.as<float>(), int64_t{kHeads} * kHeadDim, kHeadDim, c, batch.batch, nullptr, int64_t{kHeads} * kHeadDim,
            b.tokens(), kHeads, 1.f / std::sqrt(static_cast<float>(kHeadDim))};
  }
  ninfer_attention_args launch(int i) const {
    ninfer_attention_args a = args;
    a.out = out.as<float>() + static_cast<int64_t>(i) * out_floats;
    return a;
  }
};

} // namespace

TEST(GpuAttentionBackends, TwoBackendsDecodingAtOnceGiveTheBitsOfEachCallAlone) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto a = make_cuda_backend(), b = make_cuda_backend();
  auto rng = fresh_rng("two backends decoding at once");
  const KvBlockLayout blocks = KvBlockLayout::shuffled(kSlots, kSpan, 64, 3, rng);
  const size_t row = size_t{kKvHeads} * kHeadDim;
  std::vector<uint16_t> kv_k(static_cast<size_t>(blocks.pool_rows()) * row), kv_v(kv_k.size());
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : kv_k) x = to_bf16(nd(rng));
  for (auto& x : kv_v) x = to_bf16(nd(rng));
  // One token per slot, at spans from 1,200 to 3,000 keys: every one cut into chunks.
  std::vector<Seq> seqs;
  for (int32_t s = 0; s < kSlots; ++s) seqs.push_back({s, kSpan - 1 - 360 * s, 1});
  const Batch batch(seqs);
  const std::vector<float> q = randn(rng, static_cast<size_t>(batch.tokens()) * kHeads * kHeadDim);
  const ninfer_shape shape{batch.tokens(), {kHeadDim, kHeads, kKvHeads, batch.longest}, NINFER_DTYPE_BF16};
  DecodeOn on_a(*a, blocks, kv_k, kv_v, batch, q), on_b(*b, blocks, kv_k, kv_v, batch, q);

  // The planner's choice, and the split-KV variant with the fewest chunks per kv head beyond one
  // (its launches are small, so the two streams' kernels run side by side whole).
  std::vector<std::string> routes{""};
  const ninfer_variant* fewest = nullptr;
  for (const ninfer_variant* v : a->plugin().variants_for(NINFER_OP_ATTENTION))
    if (v->split_k > kKvHeads && (v->dtype_mask & (1u << shape.dtype)) && (!v->supports || v->supports(v->ctx, &shape)) &&
        (!fewest || v->split_k < fewest->split_k))
      fewest = v;
  ASSERT_NE(fewest, nullptr) << "no split-KV decode variant cuts these spans into chunks";
  routes.emplace_back(fewest->name);
  EXPECT_GT(a->plan(NINFER_OP_ATTENTION, shape).v->split_k, kKvHeads) << "the planner should cut these spans";

  for (const std::string& route : routes) {
    SCOPED_TRACE(route_name(route));
    for (Backend* be : {a.get(), b.get()}) be->reserve_workspace(NINFER_OP_ATTENTION, shape);
    // Alone: launch 0 of backend a, waited for.
    const ninfer_attention_args alone = on_a.launch(0);
    run_route(*a, NINFER_OP_ATTENTION, route, shape, &alone);
    const std::vector<float> want = get<float>(*a, on_a.out, static_cast<size_t>(on_a.out_floats));
    ASSERT_TRUE(std::none_of(want.begin(), want.end(), [](float x) { return std::isnan(x); }));
    // Together: the two backends' launches queued in turn, nobody waiting until the end.
    for (int i = 0; i < kLaunches; ++i) {
      const ninfer_attention_args la = on_a.launch(i), lb = on_b.launch(i);
      run_route(*a, NINFER_OP_ATTENTION, route, shape, &la);
      run_route(*b, NINFER_OP_ATTENTION, route, shape, &lb);
    }
    const size_t all = static_cast<size_t>(kLaunches * on_a.out_floats);
    const std::vector<float> got_a = get<float>(*a, on_a.out, all), got_b = get<float>(*b, on_b.out, all);
    int differing = 0;
    for (int i = 0; i < kLaunches; ++i)
      for (const std::vector<float>* got : {&got_a, &got_b}) {
        const float* g = got->data() + static_cast<int64_t>(i) * on_a.out_floats;
        differing += std::memcmp(g, want.data(), sizeof(float) * want.size()) != 0;
      }
    EXPECT_EQ(differing, 0) << "of " << 2 * kLaunches << " launches differ from the call run alone";
    const std::vector<float> nan(all, std::numeric_limits<float>::quiet_NaN());
    a->upload(on_a.out, 0, nan.data(), sizeof(float) * all);
    b->upload(on_b.out, 0, nan.data(), sizeof(float) * all);
  }
}
