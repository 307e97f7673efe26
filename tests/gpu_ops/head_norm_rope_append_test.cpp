// head_norm_rope_append (head_norm_rope, then kv_append of the new k and v rows, in one launch)
// on the CUDA plugin: bit for bit the plugin's own two ops, on every cache dtype, for decode
// steps and prompt chunks of several sequences; and on a float32 cache, every route against the
// CPU reference plugin.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "attention_layer_case.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

using Layout = AttentionLayout;

// Qwen3-8B (32 + 8 heads of 128), Qwen3.5-27B (24 gated + 4 of 256, 25% rotary), and odd
// widths with more v rows than fit the CTA that holds the last k row.
const Layout kLayouts[] = {{32, 8, 128, 128, 1e6, false}, {24, 4, 256, 64, 1e7, true}, {5, 3, 40, 12, 1e4, true}};

using Seq = SeqSpan;
// A decode token, batched decode (one at the last position, one past the cache: skipped by
// both paths), a prompt chunk, and a chunk with decode tokens.
const std::vector<std::vector<Seq>> kBatches{
    {{2, 5, 1}}, {{3, 17, 1}, {0, 63, 1}, {1, 64, 1}}, {{0, 0, 40}}, {{1, 10, 23}, {2, 40, 1}, {0, 3, 7}}};
constexpr int32_t kSlots = 4, kCapacity = 64;

// The cache's block table: each slot's 64 positions in 4 blocks of 16, shuffled through a pool
// with 3 blocks no slot owns (whose bytes, like every row not written, must stay).
const KvBlockLayout& blocks() {
  static const KvBlockLayout b = [] {
    auto rng = fresh_rng("gpu head_norm_rope_append blocks");
    return KvBlockLayout::shuffled(kSlots, kCapacity, 16, 3, rng);
  }();
  return b;
}

using Batch = HostTokenBatch;
Batch make_batch(const std::vector<Seq>& seqs) { return Batch(seqs); }

// Whether every token's position lies in the cache (the CPU plugin reports one that does not,
// as the contract allows; CUDA kernels skip it).
bool fits_cache(const Batch& b) {
  for (int32_t p : b.token_pos)
    if (p >= kCapacity) return false;
  return true;
}

size_t element_bytes(int32_t dtype) { return dtype == NINFER_DTYPE_F32 ? 4 : 2; }

struct Inputs {
  std::vector<float> proj, wq, wk;
  std::vector<uint8_t> k_cache, v_cache; // random bits: every byte not written must stay
};
struct Outputs {
  std::vector<float> proj;
  std::vector<uint8_t> k_cache, v_cache;
};

// Device copies of one case's inputs, and the two ops' argument structs over them.
struct DeviceCase {
  DeviceBuffer proj, wq, wk, kc, vc, ss, sl, tp, ts, table;
  ninfer_head_norm_rope_append_args args{};

  DeviceCase(Backend& be, const Layout& l, const Batch& b, const Inputs& in, int32_t dtype, int32_t offset)
      : proj(put(be, in.proj)), wq(put(be, in.wq)), wk(put(be, in.wk)), kc(put(be, in.k_cache)),
        vc(put(be, in.v_cache)), ss(put(be, b.seq_start)), sl(put(be, b.seq_slot)), tp(put(be, b.token_pos)),
        ts(put(be, b.token_seq)), table(put(be, blocks().table)) {
    float* x = proj.as<float>();
    const int64_t stride = l.token_stride(), T = b.tokens();
    const ninfer_token_batch batch{static_cast<int32_t>(b.seq_slot.size()), ss.as<int32_t>(), sl.as<int32_t>(),
                                   tp.as<int32_t>(), ts.as<int32_t>()};
    args.rope = {x,  stride, l.q_head_stride(), x + l.k_offset(), stride, l.head_dim, wq.as<float>(), wk.as<float>(),
                 tp.as<int32_t>(), T, l.q_heads, l.kv_heads, l.head_dim, l.rotary_dim, 1e-6f, offset, l.theta};
    ninfer_kv_cache cache{};
    cache.k = kc.data(), cache.v = vc.data(), cache.kv_heads = l.kv_heads, cache.head_dim = l.head_dim;
    cache.dtype = dtype;
    blocks().attach(cache, table.as<int32_t>());
    args.append = {x + l.k_offset(), stride, x + l.v_offset(), stride, cache, batch, T};
  }
  Outputs read(Backend& be, const Inputs& in) const {
    return {get<float>(be, proj, in.proj.size()), get<uint8_t>(be, kc, in.k_cache.size()),
            get<uint8_t>(be, vc, in.v_cache.size())};
  }
};

ninfer_shape shape(const Layout& l, int64_t T, int32_t dtype) {
  return {T, {l.head_dim, l.q_heads, l.kv_heads, l.rotary_dim}, dtype};
}

Inputs make_inputs(std::mt19937_64& rng, const Layout& l, int64_t T, int32_t dtype, int32_t offset) {
  Inputs in{randn(rng, static_cast<size_t>(T * l.token_stride()), 2.f), randn(rng, l.head_dim, 0.3f),
            randn(rng, l.head_dim, 0.3f), {}, {}};
  if (!offset)
    for (auto* w : {&in.wq, &in.wk})
      for (auto& v : *w) v += 1.f;
  const size_t bytes = static_cast<size_t>(blocks().pool_rows()) * l.kv_heads * l.head_dim * element_bytes(dtype);
  // 16-bit caches: random bits; float32: random values (no NaN, so a tolerance compare works).
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto* c : {&in.k_cache, &in.v_cache}) {
    c->resize(bytes);
    if (dtype == NINFER_DTYPE_F32) {
      const auto f = randn(rng, bytes / sizeof(float));
      std::memcpy(c->data(), f.data(), bytes);
    } else {
      for (auto& v : *c) v = static_cast<uint8_t>(byte(rng));
    }
  }
  return in;
}

std::string describe(const Layout& l, const Batch& b, int32_t dtype) {
  return std::to_string(l.q_heads) + "q+" + std::to_string(l.kv_heads) + "kv heads x " + std::to_string(l.head_dim) +
         (l.gated ? " gated" : "") + ", " + std::to_string(b.seq_slot.size()) + " sequences, " +
         std::to_string(b.tokens()) + " tokens, cache dtype " + std::to_string(dtype);
}

} // namespace

// The fused launch must leave exactly the bits of head_norm_rope then kv_append (the plugin's
// own kernels for both): q/k rows, the untouched gates, v rows and padding, and every cache
// byte, written or not.
TEST(HeadNormRopeAppendGpu, EqualsHeadNormRopeThenKvAppendBitForBit) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu head_norm_rope_append vs the two ops");
  auto gpu = make_cuda_backend();
  for (const Layout& l : kLayouts)
    for (const auto& seqs : kBatches)
      for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_F16, NINFER_DTYPE_BF16})
        for (int32_t offset : {0, 1}) {
          const Batch b = make_batch(seqs);
          const int64_t T = b.tokens();
          const Inputs in = make_inputs(rng, l, T, dtype, offset);
          const std::string what = describe(l, b, dtype) + " offset " + std::to_string(offset);

          DeviceCase fused(*gpu, l, b, in, dtype, offset);
          gpu->run(NINFER_OP_HEAD_NORM_ROPE_APPEND, shape(l, T, dtype), &fused.args);
          const Outputs got = fused.read(*gpu, in);

          DeviceCase two(*gpu, l, b, in, dtype, offset);
          gpu->run(NINFER_OP_HEAD_NORM_ROPE, shape(l, T, NINFER_DTYPE_F32), &two.args.rope);
          gpu->run(NINFER_OP_KV_APPEND, {T, {l.head_dim, l.kv_heads, 0, 0}, dtype}, &two.args.append);
          const Outputs want = two.read(*gpu, in);

          EXPECT_EQ(0, std::memcmp(got.proj.data(), want.proj.data(), want.proj.size() * sizeof(float))) << what;
          EXPECT_TRUE(got.k_cache == want.k_cache) << what << ": K cache";
          EXPECT_TRUE(got.v_cache == want.v_cache) << what << ": V cache";
          EXPECT_FALSE(got.k_cache == in.k_cache) << what << ": nothing was appended";
        }
}

// On a float32 cache every route against the CPU plugin (rms_norm's and rope's row functions,
// then the copy): rows within the float32 tolerance, the rest bit for bit.
TEST(HeadNormRopeAppendGpu, EveryRouteMatchesTheCpuReferenceOnAFloat32Cache) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu head_norm_rope_append vs cpu");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  for (const Layout& l : kLayouts)
    for (const auto& seqs : kBatches) {
      const Batch b = make_batch(seqs);
      if (!fits_cache(b)) continue;
      const int64_t T = b.tokens();
      const Inputs in = make_inputs(rng, l, T, NINFER_DTYPE_F32, 1);
      const std::string what = describe(l, b, NINFER_DTYPE_F32);
      DeviceCase ref(*cpu, l, b, in, NINFER_DTYPE_F32, 1);
      cpu->run(NINFER_OP_HEAD_NORM_ROPE_APPEND, shape(l, T, NINFER_DTYPE_F32), &ref.args);
      const Outputs want = ref.read(*cpu, in);
      for (const std::string& route : op_routes(*gpu, NINFER_OP_HEAD_NORM_ROPE_APPEND)) {
        DeviceCase c(*gpu, l, b, in, NINFER_DTYPE_F32, 1);
        run_route(*gpu, NINFER_OP_HEAD_NORM_ROPE_APPEND, route, shape(l, T, NINFER_DTYPE_F32), &c.args);
        const Outputs got = c.read(*gpu, in);
        auto floats = [](const std::vector<uint8_t>& bytes) {
          std::vector<float> f(bytes.size() / sizeof(float));
          std::memcpy(f.data(), bytes.data(), bytes.size());
          return f;
        };
        for (const auto& [g, w, name] : {std::tuple{got.proj, want.proj, "projection rows"},
                                         std::tuple{floats(got.k_cache), floats(want.k_cache), "K cache"},
                                         std::tuple{floats(got.v_cache), floats(want.v_cache), "V cache"}}) {
          const Mismatch m = compare(g, widen(w), kGpuVsCpuF32);
          EXPECT_TRUE(m.ok) << what << ", " << route_name(route) << ", " << name << ": " << m.describe();
        }
      }
    }
}
