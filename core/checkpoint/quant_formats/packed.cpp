#include "packed.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ninfer/support/error.hpp"
#include "ninfer/support/row_threads.hpp"

namespace ninfer::quant_detail {

void bad_tensor(const TensorView& t, const std::string& problem) {
  throw Error(fmt::format("{}: tensor {}: {}", t.file.string(), t.name, problem));
}

const TensorView* optional_tensor(const Checkpoint& ck, const QuantizedModule& m, const std::string& name,
                                  std::initializer_list<DType> dtypes, size_t rank) {
  if (!ck.has(name)) return nullptr;
  const TensorView& t = ck.tensor(name);
  if (std::find(dtypes.begin(), dtypes.end(), t.dtype) == dtypes.end()) {
    std::vector<std::string> names;
    for (DType d : dtypes) names.push_back(dtype_name(d));
    bad_tensor(t, fmt::format("has dtype {}; a {} module stores it as {}", dtype_name(t.dtype),
                              quant_method_name(m.method), fmt::join(names, " or ")));
  }
  if (t.shape.size() != rank)
    bad_tensor(t, fmt::format("has shape {}; a {} module stores it with {} dimension(s)", shape_string(t.shape),
                              quant_method_name(m.method), rank));
  return &t;
}

const TensorView& packed_tensor(const Checkpoint& ck, const QuantizedModule& m, const std::string& name,
                                std::initializer_list<DType> dtypes, size_t rank) {
  if (const TensorView* t = optional_tensor(ck, m, name, dtypes, rank)) return *t;
  throw Error(fmt::format("{}: module {} is {}-quantized ({}) but tensor {} is missing; the checkpoint is "
                          "incomplete",
                          m.file.string(), m.module, quant_method_name(m.method), fmt::join(m.tensors, ", "), name));
}

void expect_shape(const TensorView& t, const std::vector<int64_t>& want, const std::string& why) {
  if (t.shape != want)
    bad_tensor(t, fmt::format("has shape {}, but {} gives {} (truncated, or packed for another shape)",
                              shape_string(t.shape), why, shape_string(want)));
}

QuantizedMatrix start_matrix(const QuantizedModule& m, DType scale_dtype, QuantRead what) {
  QuantizedMatrix q;
  q.source = m;
  q.codes_type = m.codes;
  q.rows = m.rows;
  q.cols = m.cols;
  q.group_size = m.group_size;
  q.scale_dtype = scale_dtype;
  if (what == QuantRead::Values) q.codes.assign(static_cast<size_t>(q.rows * q.row_bytes()), 0);
  return q;
}

void transpose_scales(const TensorView& s, QuantizedMatrix& q) {
  const int64_t G = q.groups(), N = q.rows;
  const size_t e = dtype_size(s.dtype);
  q.scales.resize(static_cast<size_t>(N * G) * e);
  const auto* src = static_cast<const unsigned char*>(s.data);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < N; ++n) std::memcpy(&q.scales[(n * G + g) * e], src + (g * N + n) * e, e);
}

void copy_scales(const TensorView& s, QuantizedMatrix& q) {
  const auto* src = static_cast<const unsigned char*>(s.data);
  q.scales.assign(src, src + s.bytes);
}

void read_g_idx(const TensorView& t, QuantizedMatrix& q) {
  const int64_t K = q.cols, G = q.groups();
  std::vector<int32_t> g(static_cast<size_t>(K));
  bool trivial = true;
  for (int64_t k = 0; k < K; ++k) {
    const auto v = static_cast<int32_t>(word(t, k));
    if (v < 0 || v >= G)
      bad_tensor(t, fmt::format("entry {} is {}, outside the {} groups of a row (0 to {})", k, v, G, G - 1));
    g[static_cast<size_t>(k)] = v;
    trivial = trivial && v == k / q.group_size;
  }
  if (!trivial) q.g_idx = std::move(g);
}

void transpose_words(const TensorView& t, int64_t R, int64_t N, unsigned char* dst) {
  const auto* src = static_cast<const unsigned char*>(t.data);
  constexpr int64_t kTile = 32; // 32 x 32 words: both sides' cache lines stay in L1
  // Threads by bytes moved: 4 per word.
  for_ranges(N, threads_for(N, 4.0 * static_cast<double>(R)), [&](int64_t n0, int64_t n1) {
    for (int64_t nb = n0; nb < n1; nb += kTile)
      for (int64_t rb = 0; rb < R; rb += kTile)
        for (int64_t n = nb; n < std::min(nb + kTile, n1); ++n)
          for (int64_t r = rb; r < std::min(rb + kTile, R); ++r) std::memcpy(dst + (n * R + r) * 4, src + (r * N + n) * 4, 4);
    return std::string();
  });
}

void drop_symmetric_zeros(QuantizedMatrix& q) {
  const auto sym = static_cast<uint8_t>(1u << (q.bits() - 1));
  if (std::all_of(q.zeros.begin(), q.zeros.end(), [&](uint8_t z) { return z == sym; })) q.zeros.clear();
}

} // namespace ninfer::quant_detail
