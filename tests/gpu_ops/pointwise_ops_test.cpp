// The pointwise ops on the CUDA plugin against the CPU reference plugin: embedding, rms_norm,
// gated_rms_norm, l2_norm, silu_mul, sigmoid_gate, rope, kv_append. Every case runs the
// planner's choice and every registered variant on fresh random inputs, with outputs poisoned
// (NaN) before each run; strided rows check that nothing outside the rows is written.
// T covers one token (decode), small odd counts, and counts beyond one wave of CTAs (the
// grid-stride path).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "attention_layer_case.hpp"
#include "gpu_op_env.hpp"
#include "kv_blocks.hpp"
#include "ninfer/abi/ops/embedding.h"
#include "ninfer/abi/ops/gated_rms_norm.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/ops/l2_norm.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "ninfer/abi/ops/rope.h"
#include "ninfer/abi/ops/sigmoid_gate.h"
#include "ninfer/abi/ops/silu_mul.h"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// What one run of an op produced: the elements it must write (one vector per output), and
// whether everything it must not write is untouched.
struct Outputs {
  std::vector<std::vector<float>> values;
  bool untouched_ok = true;
};
using RunFn = std::function<Outputs(Backend&, const std::string& route)>;

// Runs `run` on the CPU backend once (the reference) and on the CUDA backend by every route;
// each output must agree within `tol`.
// `shape`: when given, only the variants that take it (op_routes).
void expect_every_route_matches_cpu(const char* op, const RunFn& run, Tolerance tol, const std::string& what,
                                    const ninfer_shape* shape = nullptr) {
  auto cpu = make_cpu_backend();
  const Outputs want = run(*cpu, "");
  ASSERT_TRUE(want.untouched_ok) << "CPU reference wrote outside its rows: " << what;
  auto gpu = make_cuda_backend();
  for (const std::string& route : op_routes(*gpu, op, shape)) {
    const Outputs got = run(*gpu, route);
    ASSERT_EQ(got.values.size(), want.values.size());
    for (size_t i = 0; i < want.values.size(); ++i) {
      const Mismatch m = compare(got.values[i], widen(want.values[i]), tol);
      EXPECT_TRUE(m.ok) << op << " " << what << ", " << route_name(route) << ", output " << i << ": "
                        << m.describe();
    }
    EXPECT_TRUE(got.untouched_ok) << op << " " << what << ", " << route_name(route) << ": wrote outside its rows";
  }
}

template <class T>
const T* ptr(const DeviceBuffer& b) {
  return b.as<T>();
}

ninfer_shape shape(int64_t T, int64_t d0, int64_t d1 = 0, int64_t d2 = 0, int32_t dtype = NINFER_DTYPE_F32) {
  return ninfer_shape{T, {d0, d1, d2, 0}, dtype};
}

const std::vector<int64_t> kTokenCounts{1, 3, 17, 1500};

} // namespace

TEST(PointwiseGpu, EmbeddingGathersF32AndBf16Rows) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu embedding");
  const int32_t vocab = 1000;
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
    for (int32_t dim : {64, 257})
      for (int64_t T : kTokenCounts) {
        const int64_t stride = dim + 3;
        const auto table = randn(rng, static_cast<size_t>(vocab) * dim);
        std::vector<uint16_t> table_bf16(table.size());
        for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = to_bf16(table[i]);
        std::uniform_int_distribution<int32_t> id(0, vocab - 1);
        std::vector<int32_t> ids(static_cast<size_t>(T));
        for (auto& v : ids) v = id(rng);
        RunFn run = [&](Backend& be, const std::string& route) {
          DeviceBuffer ids_d = put(be, ids);
          DeviceBuffer tab = dtype == NINFER_DTYPE_F32 ? put(be, table) : put(be, table_bf16);
          DeviceBuffer out = poisoned_buffer(be, static_cast<size_t>(T * stride));
          ninfer_embedding_args a{ptr<int32_t>(ids_d), tab.data(), out.as<float>(), stride, T, vocab, dim, dtype};
          run_route(be, NINFER_OP_EMBEDDING, route, shape(T, dim, vocab, 0, dtype), &a);
          const auto y = get<float>(be, out, static_cast<size_t>(T * stride));
          return Outputs{{row_elements(y, T, dim, stride)}, padding_still_poisoned(y, T, dim, stride)};
        };
        expect_every_route_matches_cpu(NINFER_OP_EMBEDDING, run, kExactCopy,
                                       "dtype " + std::to_string(dtype) + " dim " + std::to_string(dim) + " T=" +
                                           std::to_string(T));
      }
}

// The GPU cannot return an error from inside a kernel; an id outside the table must give a NaN
// row (visible downstream), never a read past the table, and leave the other rows right.
TEST(PointwiseGpu, EmbeddingIdOutsideTheTableGivesANanRow) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu embedding bad id");
  const int32_t vocab = 50, dim = 40;
  const auto table = randn(rng, static_cast<size_t>(vocab) * dim);
  const std::vector<int32_t> ids{3, vocab, 7, -1};
  auto be = make_cuda_backend();
  for (const std::string& route : op_routes(*be, NINFER_OP_EMBEDDING)) {
    DeviceBuffer ids_d = put(*be, ids), tab = put(*be, table);
    DeviceBuffer out = put(*be, std::vector<float>(ids.size() * dim, 0.f));
    ninfer_embedding_args a{ptr<int32_t>(ids_d), tab.data(), out.as<float>(), dim, 4, vocab, dim, NINFER_DTYPE_F32};
    run_route(*be, NINFER_OP_EMBEDDING, route, shape(4, dim, vocab), &a);
    const auto y = get<float>(*be, out, ids.size() * dim);
    for (int i = 0; i < dim; ++i) {
      EXPECT_EQ(y[i], table[3 * dim + i]) << route_name(route);
      EXPECT_TRUE(std::isnan(y[dim + i])) << route_name(route) << ": id == vocab";
      EXPECT_EQ(y[2 * dim + i], table[7 * dim + i]) << route_name(route);
      EXPECT_TRUE(std::isnan(y[3 * dim + i])) << route_name(route) << ": id -1";
    }
  }
}

// One row per token (the layer norm), plain and (1+w), with and without the fused residual add,
// on strided rows: a row of 5120 is reduced by a whole CTA. Strides that are multiples of 4 take
// the in_registers kernel's float4 path, the others its scalar one.
TEST(PointwiseGpu, RmsNormRowsWithAndWithoutResidual) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu rms_norm rows");
  for (int32_t dim : {96, 1000, 5120})
    for (bool vectors : {false, true})
      for (int64_t T : kTokenCounts)
        for (int32_t offset : {0, 1})
          for (bool with_residual : {false, true}) {
            const int64_t xs = dim + (vectors ? 4 : 5), rs = dim + (vectors ? 8 : 2), ys = dim + (vectors ? 0 : 1);
            const auto x = randn(rng, static_cast<size_t>(T * xs), 3.f);
            const auto res = randn(rng, static_cast<size_t>(T * rs));
            auto w = randn(rng, dim, 0.5f);
            if (!offset)
              for (auto& v : w) v += 1.f;
            RunFn run = [&](Backend& be, const std::string& route) {
              DeviceBuffer xd = put(be, x), rd = put(be, res), wd = put(be, w);
              DeviceBuffer yd = poisoned_buffer(be, static_cast<size_t>(T * ys));
              ninfer_rms_norm_args a{ptr<float>(xd), xs, 0, with_residual ? rd.as<float>() : nullptr, rs, 0,
                                     ptr<float>(wd), yd.as<float>(), ys, 0, T, 1, dim, 1e-6f, offset};
              run_route(be, NINFER_OP_RMS_NORM, route, shape(T, dim, 1), &a);
              const auto y = get<float>(be, yd, static_cast<size_t>(T * ys));
              const auto r = get<float>(be, rd, static_cast<size_t>(T * rs));
              // The residual buffer holds x + residual after the call (its padding is untouched input).
              return Outputs{{row_elements(y, T, dim, ys), r}, padding_still_poisoned(y, T, dim, ys)};
            };
            expect_every_route_matches_cpu(NINFER_OP_RMS_NORM, run, kGpuVsCpuF32,
                                           "dim " + std::to_string(dim) + (vectors ? " float4" : " scalar") +
                                               " T=" + std::to_string(T) + " offset " +
                                               std::to_string(offset) + " residual " + std::to_string(with_residual));
          }
}

// Per-head q/k norm in place on Qwen3.5's q_proj layout (per token [heads x (query | gate)]):
// rows are head_dim long, head_stride apart, inside a wider token row. The gate halves and
// the token padding must stay as they were.
TEST(PointwiseGpu, RmsNormPerHeadInPlaceOnStridedRows) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu rms_norm per head");
  struct Case {
    int32_t heads, head_dim;
  };
  for (Case c : {Case{5, 32}, Case{16, 256}, Case{32, 128}, Case{3, 100}})
    for (int64_t T : kTokenCounts) {
      const int64_t head_stride = 2 * c.head_dim, token_stride = c.heads * head_stride + 3;
      const auto buf = randn(rng, static_cast<size_t>(T * token_stride), 2.f);
      const auto w = randn(rng, c.head_dim, 0.3f);
      for (int32_t offset : {0, 1}) {
        RunFn run = [&](Backend& be, const std::string& route) {
          DeviceBuffer xd = put(be, buf), wd = put(be, w);
          ninfer_rms_norm_args a{xd.as<float>(), token_stride, head_stride, nullptr, 0, 0, ptr<float>(wd),
                                 xd.as<float>(), token_stride, head_stride, T, c.heads, c.head_dim, 1e-6f, offset};
          run_route(be, NINFER_OP_RMS_NORM, route, shape(T, c.head_dim, c.heads), &a);
          // The whole buffer: normalised rows, and everything else exactly as it was.
          return Outputs{{get<float>(be, xd, buf.size())}};
        };
        expect_every_route_matches_cpu(NINFER_OP_RMS_NORM, run, kGpuVsCpuF32,
                                       std::to_string(c.heads) + " heads x " + std::to_string(c.head_dim) + " T=" +
                                           std::to_string(T) + " offset " + std::to_string(offset));
      }
    }
}

TEST(PointwiseGpu, GatedRmsNormOutOfPlaceAndInPlace) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu gated_rms_norm");
  for (int32_t heads : {1, 6, 48})
    for (int32_t dim : {128, 77})
      for (int64_t T : kTokenCounts)
        for (bool in_place : {false, true}) {
          const int64_t row = static_cast<int64_t>(heads) * dim;
          const int64_t xs = row + 4, zs = row + 7, ys = in_place ? xs : row + 1;
          const auto x = randn(rng, static_cast<size_t>(T * xs), 2.f), z = randn(rng, static_cast<size_t>(T * zs), 2.f);
          const auto w = randn(rng, dim, 0.3f);
          RunFn run = [&](Backend& be, const std::string& route) {
            DeviceBuffer xd = put(be, x), zd = put(be, z), wd = put(be, w);
            DeviceBuffer yd = in_place ? DeviceBuffer() : poisoned_buffer(be, static_cast<size_t>(T * ys));
            float* y = in_place ? xd.as<float>() : yd.as<float>();
            ninfer_gated_rms_norm_args a{ptr<float>(xd), xs, ptr<float>(zd), zs, ptr<float>(wd), y, ys, T, heads,
                                         dim, 1e-6f};
            run_route(be, NINFER_OP_GATED_RMS_NORM, route, shape(T, dim, heads), &a);
            if (in_place) return Outputs{{get<float>(be, xd, x.size())}};
            const auto yv = get<float>(be, yd, static_cast<size_t>(T * ys));
            return Outputs{{row_elements(yv, T, row, ys)}, padding_still_poisoned(yv, T, row, ys)};
          };
          expect_every_route_matches_cpu(NINFER_OP_GATED_RMS_NORM, run, kGpuVsCpuF32,
                                         std::to_string(heads) + " heads x " + std::to_string(dim) + " T=" +
                                             std::to_string(T) + (in_place ? " in place" : ""));
        }
}

// q and k of a Gated DeltaNet layer, normalised in place where they lie in the fused
// projection output (head rows head_stride apart inside a wider token row).
TEST(PointwiseGpu, L2NormInPlaceOnStridedHeadRows) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu l2_norm");
  for (int32_t heads : {1, 16, 5})
    for (int32_t dim : {128, 33})
      for (int64_t T : kTokenCounts) {
        const int64_t head_stride = dim + 2, token_stride = heads * head_stride + 9;
        const auto buf = randn(rng, static_cast<size_t>(T * token_stride), 1.5f);
        RunFn run = [&](Backend& be, const std::string& route) {
          DeviceBuffer xd = put(be, buf);
          ninfer_l2_norm_args a{xd.as<float>(), token_stride, head_stride, T, heads, dim, 1e-6f};
          run_route(be, NINFER_OP_L2_NORM, route, shape(T, dim, heads), &a);
          return Outputs{{get<float>(be, xd, buf.size())}};
        };
        expect_every_route_matches_cpu(NINFER_OP_L2_NORM, run, kGpuVsCpuF32,
                                       std::to_string(heads) + " heads x " + std::to_string(dim) + " T=" +
                                           std::to_string(T));
      }
}

// gate and up as the two halves of one fused gate_up projection; out separate (strided) or
// gate itself.
TEST(PointwiseGpu, SiluMulOnFusedGateUpRows) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu silu_mul");
  for (int32_t width : {17408, 1000, 33})
    for (int64_t T : kTokenCounts)
      for (bool in_place : {false, true}) {
        if (width == 17408 && T > 17) continue; // the wide row is the decode case
        const int64_t gs = 2 * static_cast<int64_t>(width) + 1, os = in_place ? gs : width + 3;
        const auto gate_up = randn(rng, static_cast<size_t>(T * gs), 3.f);
        RunFn run = [&](Backend& be, const std::string& route) {
          DeviceBuffer gd = put(be, gate_up);
          DeviceBuffer od = in_place ? DeviceBuffer() : poisoned_buffer(be, static_cast<size_t>(T * os));
          float* out = in_place ? gd.as<float>() : od.as<float>();
          ninfer_silu_mul_args a{gd.as<float>(), gs, gd.as<float>() + width, gs, out, os, T, width};
          run_route(be, NINFER_OP_SILU_MUL, route, shape(T, width), &a);
          if (in_place) return Outputs{{get<float>(be, gd, gate_up.size())}};
          const auto o = get<float>(be, od, static_cast<size_t>(T * os));
          return Outputs{{row_elements(o, T, width, os)}, padding_still_poisoned(o, T, width, os)};
        };
        expect_every_route_matches_cpu(NINFER_OP_SILU_MUL, run, kGpuVsCpuF32,
                                       "width " + std::to_string(width) + " T=" + std::to_string(T) +
                                           (in_place ? " in place" : ""));
      }
}

// Qwen3.5's attention output gate: the gate lies interleaved per head with the query in the
// q_proj output ([query | gate] per head), x is the attention output.
TEST(PointwiseGpu, SigmoidGateReadsTheInterleavedGate) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu sigmoid_gate");
  for (int32_t heads : {24, 3})
    for (int32_t head_dim : {256, 50})
      for (int64_t T : kTokenCounts) {
        const int64_t xs = static_cast<int64_t>(heads) * head_dim + 6;
        const int64_t ghs = 2 * static_cast<int64_t>(head_dim), gts = heads * ghs + 1;
        const auto x = randn(rng, static_cast<size_t>(T * xs), 2.f), q = randn(rng, static_cast<size_t>(T * gts), 3.f);
        RunFn run = [&](Backend& be, const std::string& route) {
          DeviceBuffer xd = put(be, x), qd = put(be, q);
          ninfer_sigmoid_gate_args a{xd.as<float>(), xs, ptr<float>(qd) + head_dim, gts, ghs, T, heads, head_dim};
          run_route(be, NINFER_OP_SIGMOID_GATE, route, shape(T, head_dim, heads), &a);
          return Outputs{{get<float>(be, xd, x.size())}};
        };
        expect_every_route_matches_cpu(NINFER_OP_SIGMOID_GATE, run, kGpuVsCpuF32,
                                       std::to_string(heads) + " heads x " + std::to_string(head_dim) + " T=" +
                                           std::to_string(T));
      }
}

// Full rotary (Qwen3: 128 of 128) and partial (Qwen3.5: 64 of 256), on q/k rows inside a fused
// projection, at positions up to 262,143 where a float32 angle would already be wrong.
TEST(PointwiseGpu, RopeFullAndPartialAtLargePositions) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu rope");
  struct Case {
    int32_t heads, head_dim, rotary;
    double theta;
  };
  for (Case c : {Case{8, 128, 128, 1e6}, Case{6, 256, 64, 1e7}, Case{3, 10, 6, 10000.0}})
    for (int64_t T : kTokenCounts) {
      const int64_t head_stride = c.head_dim + 4, token_stride = c.heads * head_stride + 2;
      const auto buf = randn(rng, static_cast<size_t>(T * token_stride), 2.f);
      std::vector<int32_t> pos(static_cast<size_t>(T));
      std::uniform_int_distribution<int32_t> far(0, 262143);
      const int32_t start = far(rng) % (262144 - 1500);
      for (int64_t t = 0; t < T; ++t) pos[t] = t % 2 ? far(rng) : start + static_cast<int32_t>(t); // mixed
      RunFn run = [&](Backend& be, const std::string& route) {
        DeviceBuffer xd = put(be, buf), pd = put(be, pos);
        ninfer_rope_args a{xd.as<float>(), token_stride, head_stride, ptr<int32_t>(pd), T, c.heads, c.head_dim,
                           c.rotary, c.theta};
        run_route(be, NINFER_OP_ROPE, route, shape(T, c.head_dim, c.heads, c.rotary), &a);
        return Outputs{{get<float>(be, xd, buf.size())}};
      };
      expect_every_route_matches_cpu(NINFER_OP_ROPE, run, kGpuVsCpuF32,
                                     std::to_string(c.heads) + " heads x " + std::to_string(c.head_dim) + " rotary " +
                                         std::to_string(c.rotary) + " T=" + std::to_string(T));
    }
}

// A prefill chunk of one sequence, a batched decode step of several sequences, and a mix, into
// distinct slots of one cache paged through a shuffled table of 8-token blocks (with blocks no
// slot owns); k and v rows read where they lie in a fused qkv output. Every cache row the batch
// does not own must be left as it was.
TEST(PointwiseGpu, KvAppendWritesOnlyTheBatchRows) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu kv_append");
  const std::vector<std::vector<SeqSpan>> batches{
      {{2, 5, 1}},                          // one decode token
      {{0, 0, 40}},                         // a prefill chunk
      {{3, 17, 1}, {0, 63, 1}, {1, 0, 1}},  // batched decode, one at the last position
      {{1, 10, 23}, {2, 40, 1}, {0, 3, 7}}, // chunk + decode + chunk
  };
  for (int32_t head_dim : {128, 96})
    for (const auto& seqs : batches) {
      const int32_t slots = 4, capacity = 64, kv_heads = 2, q_heads = 8;
      const HostTokenBatch b(seqs);
      const int64_t T = b.tokens();
      const int64_t qkv_stride = static_cast<int64_t>(q_heads + 2 * kv_heads) * head_dim + 1;
      const auto qkv = randn(rng, static_cast<size_t>(T * qkv_stride));
      const KvBlockLayout blocks = KvBlockLayout::shuffled(slots, capacity, /*block_tokens=*/8, /*spare=*/3, rng);
      const size_t cache_elems = static_cast<size_t>(blocks.pool_rows()) * kv_heads * head_dim;
      const auto k_cache0 = randn(rng, cache_elems), v_cache0 = randn(rng, cache_elems);
      RunFn run = [&](Backend& be, const std::string& route) {
        DeviceBuffer qd = put(be, qkv), kc = put(be, k_cache0), vc = put(be, v_cache0);
        DeviceBuffer ss = put(be, b.seq_start), sl = put(be, b.seq_slot), tp = put(be, b.token_pos),
                     ts = put(be, b.token_seq), table = put(be, blocks.table);
        ninfer_kv_append_args a{};
        a.k = ptr<float>(qd) + static_cast<int64_t>(q_heads) * head_dim;
        a.k_token_stride = qkv_stride;
        a.v = a.k + static_cast<int64_t>(kv_heads) * head_dim;
        a.v_token_stride = qkv_stride;
        a.cache = blocks.cache(kc.as<float>(), vc.as<float>(), kv_heads, head_dim, NINFER_DTYPE_F32);
        blocks.attach(a.cache, table.as<int32_t>());
        a.batch = {static_cast<int32_t>(seqs.size()), ptr<int32_t>(ss), ptr<int32_t>(sl), ptr<int32_t>(tp),
                   ptr<int32_t>(ts)};
        a.tokens = T;
        run_route(be, NINFER_OP_KV_APPEND, route, shape(T, head_dim, kv_heads), &a);
        return Outputs{{get<float>(be, kc, cache_elems), get<float>(be, vc, cache_elems)}};
      };
      const ninfer_shape float_cache = shape(T, head_dim, kv_heads);
      expect_every_route_matches_cpu(NINFER_OP_KV_APPEND, run, kExactCopy,
                                     std::to_string(seqs.size()) + " sequences, " + std::to_string(T) +
                                         " tokens, head_dim " + std::to_string(head_dim),
                                     &float_cache);
    }
}
