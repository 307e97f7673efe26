// What the attention GPU tests (float32, 16-bit and compact caches) share: a call described as
// sequences of a cache's slots, its token batch as host arrays and on a backend, and the per-row
// tolerance of the tensor-core prefill and decode kernels.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/token_batch.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::test {

struct Seq {
  int32_t slot, pos0, n; // n tokens at positions [pos0, pos0 + n) of slot
};

struct Call {
  std::string name;
  std::vector<Seq> seqs;
};

// The token batch of a call: sequence starts and slots, each token's position and sequence.
struct Batch {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;
  int32_t longest = 0;
  explicit Batch(const std::vector<Seq>& seqs) {
    for (const Seq& s : seqs) {
      for (int32_t i = 0; i < s.n; ++i) {
        token_pos.push_back(s.pos0 + i);
        token_seq.push_back(static_cast<int32_t>(seq_slot.size()));
      }
      seq_slot.push_back(s.slot);
      seq_start.push_back(seq_start.back() + s.n);
      longest = std::max(longest, s.pos0 + s.n);
    }
  }
  int64_t tokens() const { return static_cast<int64_t>(token_pos.size()); }
};

// A batch's arrays on one backend.
struct BatchOn {
  DeviceBuffer seq_start, seq_slot, token_pos, token_seq;
  ninfer_token_batch batch{};
  BatchOn(Backend& be, const Batch& b)
      : seq_start(put(be, b.seq_start)), seq_slot(put(be, b.seq_slot)), token_pos(put(be, b.token_pos)),
        token_seq(put(be, b.token_seq)) {
    batch = {static_cast<int32_t>(b.seq_slot.size()), seq_start.as<int32_t>(), seq_slot.as<int32_t>(),
             token_pos.as<int32_t>(), token_seq.as<int32_t>()};
  }
};

// The tensor-core prefill (`prefill_mma_*`) rounds q, K, V and the softmax weights to bf16
// (unit roundoff u = 2^-8, so a rounding moves a value by about u / sqrt(3) = 2.3e-3 of itself)
// and accumulates in float32, so it is held to its own tolerance, per output row. On these
// inputs (N(0,1) queries and cache, scale 1/sqrt(head_dim): scores of unit spread) each score
// is off by about sqrt(2) u / sqrt(3), each weight relatively by that, and each value and
// weight element is rounded once: about 4e-3 of the row's norm, whatever the span (the errors
// of different keys and dims are independent, like the terms of the row). Measured on the H200
// (GpuAttentionMmaVsCpu, 190,000 rows per head dim): worst rows 6.8e-3 (hd256) to 9.4e-3
// (hd130); 2e-2 is twice that. A kernel bug costs more: one key too many or too few in a row
// of N keys moves it by about 1/sqrt(N) (O(1) in the short rows every prompt from position 0
// has, 1.6e-2 at 4096), a lost tile, a wrong mask or a foreign row O(1); NaN never passes.
struct RowTolerance {
  const char* name;
  double rel_l2;
};
constexpr RowTolerance kBf16AttentionRows{"bf16-attention-row-rel-l2", 2e-2};
// The fp16 variants (`prefill_mma_f16_*`, the default) round the same values with u = 2^-11:
// the same analysis gives 8x less, about 5e-4 per row; 3e-3 leaves the margin the bf16 bound
// has over its measured worst. A key too many in a row of 4096 (1.6e-2) is far outside it.
constexpr RowTolerance kF16AttentionRows{"fp16-attention-row-rel-l2", 3e-3};

inline bool mma_variant(const std::string& name) { return name.rfind("prefill_mma", 0) == 0; }
// The split-KV decode of the hd128 class (and of hd256 in sm_90 builds) runs on tensor cores when
// the cache is float16 or bfloat16 (attention/decode_mma.cuh), rounding q and the weights to the
// cache's format as the prefill does: held to that format's row tolerance. Other decode calls
// attend in float32 (a plugin without the hd256 kernel meets the tighter bound all the more).
inline const RowTolerance* tensor_core_decode(const std::string& variant, int32_t cache_dtype) {
  auto ends_with = [&](const std::string& cls) {
    return variant.size() > cls.size() && variant.compare(variant.size() - cls.size(), cls.size(), cls) == 0;
  };
  if (variant.rfind("decode_", 0) != 0 || !(ends_with("_hd128") || ends_with("_hd256"))) return nullptr;
  if (cache_dtype == NINFER_DTYPE_F16) return &kF16AttentionRows;
  return cache_dtype == NINFER_DTYPE_BF16 ? &kBf16AttentionRows : nullptr;
}
inline bool f16_variant(const std::string& name) { return name.rfind("prefill_mma_f16", 0) == 0; }
inline const RowTolerance& mma_tolerance(const std::string& name) {
  return f16_variant(name) ? kF16AttentionRows : kBf16AttentionRows;
}

// The worst relative L2 error over the head_dim-long rows of `got`; infinite at any element
// that is not finite.
struct RowError {
  double worst = 0;
  int64_t row = -1;
  std::string describe(int64_t heads, const RowTolerance& tol) const {
    return "worst row relative L2 " + std::to_string(worst) + " at token " + std::to_string(row / heads) +
           ", head " + std::to_string(row % heads) + " (tolerance " + tol.name + " " + std::to_string(tol.rel_l2) +
           ")";
  }
};

inline RowError worst_row_error(const std::vector<float>& got, const std::vector<double>& want, int64_t head_dim) {
  RowError e;
  for (size_t r = 0; r * head_dim < got.size(); ++r) {
    double num = 0, den = 0;
    bool finite = true;
    for (int64_t d = 0; d < head_dim; ++d) {
      const size_t i = r * head_dim + d;
      finite = finite && std::isfinite(got[i]);
      num += (got[i] - want[i]) * (got[i] - want[i]);
      den += want[i] * want[i];
    }
    const double rel = finite ? std::sqrt(num / std::max(den, 1e-30)) : INFINITY;
    if (rel > e.worst || e.row < 0) {
      e.worst = rel;
      e.row = static_cast<int64_t>(r);
    }
  }
  return e;
}

// A tensor-core variant's rows against the float32 reference, within its input format's
// tolerance; returns the worst row.
inline RowError expect_rows_within(const std::vector<float>& got, const std::vector<double>& want, int64_t head_dim,
                                   int64_t heads, const RowTolerance& tol, const std::string& what) {
  const RowError e = worst_row_error(got, want, head_dim);
  EXPECT_LE(e.worst, tol.rel_l2) << what << ": " << e.describe(heads, tol);
  return e;
}
inline RowError expect_mma_rows(const std::vector<float>& got, const std::vector<double>& want, int64_t head_dim,
                         int64_t heads, const std::string& variant, const std::string& what) {
  return expect_rows_within(got, want, head_dim, heads, mma_tolerance(variant), what);
}

} // namespace ninfer::test
