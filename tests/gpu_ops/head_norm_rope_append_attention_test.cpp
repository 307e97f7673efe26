// head_norm_rope_append_attention on the CUDA plugin against the plugin's own two ops
// (head_norm_rope_append, then attention, each checked against the CPU reference elsewhere), on
// 16-bit caches, for decode steps: one token early in a sequence, one at 4,100 keys (split into
// chunks), a batch of three, and a token outside the cache. Every route and the planner's choice.
// The fold computes the same rows with its own instructions, so a new K row may round to the
// neighbouring 16-bit value and a q element to the neighbouring one of the cache's format: the
// output rows are held to the tensor-core decode's row tolerance. V rows and every cache row the
// call does not write are bit for bit. The cache is paged through a shuffled table of 64-token
// blocks in a pool with blocks no slot owns (those stay bit for bit too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attention_layer_case.hpp"
#include "attention_test_common.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

using Layout = AttentionLayout;
// Qwen3-8B; gated q with a quarter rotary; 96-dim heads (padding inside the 128 class).
const Layout kLayouts[] = {{32, 8, 128, 128, 1e6, false}, {16, 2, 128, 32, 1e7, true}, {8, 2, 96, 96, 1e4, false}};
constexpr int32_t kSlots = 4, kCapacity = 4160, kBlockTokens = 64, kSpareBlocks = 3;

struct Seq {
  int32_t slot, pos;
};
const std::vector<std::vector<Seq>> kBatches{
    {{2, 5}}, {{1, 4100}}, {{0, 40}, {2, 63}, {1, 1000}}, {{3, kCapacity}, {0, 17}}};

// Random 16-bit cache values of magnitude ~2^-3..2^3, never NaN or infinity.
std::vector<uint16_t> cache_values(std::mt19937_64& rng, size_t n, int32_t dtype) {
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  std::vector<uint16_t> out(n);
  for (auto& v : out) {
    const uint32_t r = bits(rng);
    v = dtype == NINFER_DTYPE_BF16 ? static_cast<uint16_t>((r & 0x807f) | ((124 + (r >> 7) % 7) << 7))
                                   : static_cast<uint16_t>((r & 0x83ff) | ((12 + (r >> 10) % 7) << 10));
  }
  return out;
}
float widen(uint16_t v, int32_t dtype) {
  if (dtype == NINFER_DTYPE_BF16) return from_bf16(v);
  const int e = (v >> 10) & 31, m = v & 1023; // normal values only (cache_values)
  const float f = std::ldexp(1.f + m / 1024.f, e - 15);
  return v & 0x8000 ? -f : f;
}

// The longest attended span of the call (a token outside the cache attends to none).
int32_t span_of(const std::vector<Seq>& seqs) {
  int32_t span = 0;
  for (const Seq& s : seqs) span = std::max(span, std::min(s.pos, kCapacity - 1) + 1);
  return span;
}

struct Result {
  std::vector<float> out;
  std::vector<uint16_t> k, v;
};

// Runs the call on fresh device copies: the fused op by `route` ("" the planner's choice); with
// route "two ops" head_norm_rope_append then attention (the planner's choice); with "two ops, V"
// the same with attention variant V.
Result run(Backend& be, const Layout& l, const std::vector<Seq>& seqs, int32_t dtype, const std::vector<float>& proj,
           const std::vector<float>& wq, const std::vector<float>& wk, const std::vector<uint16_t>& kc,
           const std::vector<uint16_t>& vc, const KvBlockLayout& blocks, const std::string& route) {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seq_slot.push_back(seqs[i].slot);
    token_pos.push_back(seqs[i].pos);
    token_seq.push_back(static_cast<int32_t>(i));
    seq_start.push_back(static_cast<int32_t>(i + 1));
  }
  const int64_t T = static_cast<int64_t>(seqs.size());
  DeviceBuffer p = put(be, proj), wqd = put(be, wq), wkd = put(be, wk), kd = put(be, kc), vd = put(be, vc);
  DeviceBuffer ss = put(be, seq_start), sl = put(be, seq_slot), tp = put(be, token_pos), ts = put(be, token_seq);
  DeviceBuffer table = put(be, blocks.table);
  const size_t out_n = static_cast<size_t>(T * l.q_heads * l.head_dim);
  DeviceBuffer out = poisoned_buffer(be, out_n);
  float* x = p.as<float>();
  const ninfer_token_batch batch{static_cast<int32_t>(T), ss.as<int32_t>(), sl.as<int32_t>(), tp.as<int32_t>(),
                                 ts.as<int32_t>()};
  ninfer_kv_cache cache{};
  cache.k = kd.data(), cache.v = vd.data(), cache.kv_heads = l.kv_heads, cache.head_dim = l.head_dim;
  cache.dtype = dtype;
  blocks.attach(cache, table.as<int32_t>());
  ninfer_head_norm_rope_append_attention_args a{};
  a.prep.rope = {x,          l.token_stride(), l.q_head_stride(), x + l.k_offset(), l.token_stride(),
                 l.head_dim, wqd.as<float>(),  wkd.as<float>(),   tp.as<int32_t>(), T,
                 l.q_heads,  l.kv_heads,       l.head_dim,        l.rotary_dim,     1e-6f,
                 1,          l.theta};
  a.prep.append = {x + l.k_offset(), l.token_stride(), x + l.v_offset(), l.token_stride(), cache, batch, T};
  a.attn = {x, l.token_stride(), l.q_head_stride(), cache, batch, out.as<float>(), int64_t{l.q_heads} * l.head_dim,
            T, l.q_heads, 1.0f / std::sqrt(static_cast<float>(l.head_dim))};
  const ninfer_shape shape{T, {l.head_dim, l.q_heads, l.kv_heads, span_of(seqs)}, dtype};
  const std::string two = "two ops";
  if (route.rfind(two, 0) == 0) {
    be.reserve_workspace(NINFER_OP_ATTENTION, shape);
    be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND, {T, {l.head_dim, l.q_heads, l.kv_heads, l.rotary_dim}, dtype}, &a.prep);
    run_route(be, NINFER_OP_ATTENTION, route == two ? "" : route.substr(two.size() + 2), shape, &a.attn);
  } else {
    be.reserve_workspace(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape);
    run_route(be, NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, route, shape, &a);
  }
  return {get<float>(be, out, out_n), get<uint16_t>(be, kd, kc.size()), get<uint16_t>(be, vd, vc.size())};
}

} // namespace

// Also the attention op's split2 / split4 decode after head_norm_rope_append against its
// planner's choice (one kv head per CTA there).
TEST(HeadNormRopeAppendAttentionGpu, EveryRouteMatchesTheTwoOpsOfThePlugin) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu head_norm_rope_append_attention");
  auto gpu = make_cuda_backend();
  std::vector<std::string> routes = op_routes(*gpu, NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION);
  // The attention op alone with few splits: a CTA then takes several kv heads, and a later
  // head's tiles reuse the space that held the previous head's merge slots.
  for (const char* v : {"decode_split2_hd128", "decode_split4_hd128"}) routes.push_back(std::string("two ops, ") + v);
  // A K row may round to the neighbouring 16-bit value: 2^-7 relative for bfloat16.
  constexpr Tolerance kNewKRow{"fold-k-row-one-16-bit-step", 0, 8e-3};
  const KvBlockLayout blocks = KvBlockLayout::shuffled(kSlots, kCapacity, kBlockTokens, kSpareBlocks, rng);
  for (const Layout& l : kLayouts)
    for (const auto& seqs : kBatches)
      for (int32_t dtype : {NINFER_DTYPE_F16, NINFER_DTYPE_BF16}) {
        const size_t cache_n = static_cast<size_t>(blocks.pool_rows()) * l.kv_heads * l.head_dim;
        const auto proj = randn(rng, static_cast<size_t>(seqs.size() * l.token_stride()), 2.f);
        const auto wq = randn(rng, l.head_dim, 0.3f), wk = randn(rng, l.head_dim, 0.3f);
        const auto kc = cache_values(rng, cache_n, dtype), vc = cache_values(rng, cache_n, dtype);
        const Result want = run(*gpu, l, seqs, dtype, proj, wq, wk, kc, vc, blocks, "two ops");
        for (const std::string& route : routes) {
          const ninfer_shape probe{static_cast<int64_t>(seqs.size()), {l.head_dim, l.q_heads, l.kv_heads, span_of(seqs)},
                                   dtype};
          if (!route.empty()) {
            const bool two_ops = route.rfind("two ops, ", 0) == 0;
            const ninfer_variant* v =
                two_ops ? gpu->plugin().find_variant(NINFER_OP_ATTENTION, route.substr(9))
                        : gpu->plugin().find_variant(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, route);
            if (v && v->supports && !v->supports(v->ctx, &probe)) continue; // a split this shape's keys do not fill
          }
          const Result got = run(*gpu, l, seqs, dtype, proj, wq, wk, kc, vc, blocks, route);
          const std::string what = std::to_string(l.q_heads) + "q/" + std::to_string(l.kv_heads) + "kv x " +
                                   std::to_string(l.head_dim) + (l.gated ? " gated" : "") + ", " +
                                   std::to_string(seqs.size()) + " sequences, first at " +
                                   std::to_string(seqs[0].pos) + ", dtype " + std::to_string(dtype) + ", " +
                                   route_name(route);
          EXPECT_TRUE(got.v == want.v) << what << ": V cache";
          std::vector<float> gk(cache_n);
          std::vector<double> wk_(cache_n);
          for (size_t i = 0; i < cache_n; ++i) gk[i] = widen(got.k[i], dtype), wk_[i] = widen(want.k[i], dtype);
          const Mismatch mk = compare(gk, wk_, kNewKRow);
          EXPECT_TRUE(mk.ok) << what << ": K cache: " << mk.describe();
          EXPECT_FALSE(got.k == kc) << what << ": nothing was appended";
          // Rows of a token outside the cache are NaN on both paths; the others are held to the
          // tensor-core decode's row tolerance for the cache's format.
          std::vector<float> g;
          std::vector<double> w;
          for (size_t i = 0; i < want.out.size(); ++i) {
            if (std::isnan(want.out[i])) {
              EXPECT_TRUE(std::isnan(got.out[i])) << what << ": element " << i << " of a token outside the cache";
              continue;
            }
            g.push_back(got.out[i]);
            w.push_back(want.out[i]);
          }
          const RowTolerance& tol = dtype == NINFER_DTYPE_F16 ? kF16AttentionRows : kBf16AttentionRows;
          expect_rows_within(g, w, l.head_dim, l.q_heads, tol, what + ": attention output");
        }
      }
}
