#include "ninfer/quantize/rtn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ninfer/support/error.hpp"
#include "ninfer/support/row_threads.hpp"

namespace ninfer {

namespace {

// Rows [begin, end) of rtn_quantize; returns the first problem instead of throwing, so threads
// can report it.
std::string quantize_rows(const float* w, QuantizedWeights& m, const GridSpec& spec, int64_t begin, int64_t end,
                          const std::string& tensor) {
  const int64_t cols = m.cols, group = m.group, G = cols / group;
  const int offset = 1 << (m.bits - 1);
  for (int64_t n = begin; n < end; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const float* x = w + n * cols + g * group;
      float lo = x[0], hi = x[0];
      for (int64_t k = 0; k < group; ++k) {
        if (!std::isfinite(x[k]))
          return fmt::format("{}: element [{}, {}] is {}; a weight must be finite to be quantized", tensor, n,
                             g * group + k, x[k]);
        lo = std::min(lo, x[k]);
        hi = std::max(hi, x[k]);
      }
      GroupGrid grid;
      if (std::string p = choose_grid(lo, hi, spec, grid); !p.empty())
        return fmt::format("{}: row {} group {} {}; quantize with --format compressed-tensors from a bf16 source or "
                           "leave this module unquantized",
                           tensor, n, g, p);
      m.scales[static_cast<size_t>(n * G + g)] = grid.scale;
      if (!m.symmetric) m.zeros[static_cast<size_t>(n * G + g)] = static_cast<uint8_t>(grid.zero);
      int8_t* q = m.q.data() + n * cols + g * group;
      for (int64_t k = 0; k < group; ++k) q[k] = static_cast<int8_t>(grid_code(x[k], grid, spec) - offset);
    }
  }
  return {};
}

} // namespace

QuantizedWeights rtn_quantize(const float* w, int64_t rows, int64_t cols, int64_t group, const GridSpec& spec,
                              const std::string& tensor) {
  if (spec.bits != 4 && spec.bits != 8) throw Error(fmt::format("{}: {} bits is not supported (4 or 8)", tensor, spec.bits));
  if (group < 1 || cols % group != 0)
    throw Error(fmt::format("{}: group size {} does not divide its {} input channels", tensor, group, cols));
  QuantizedWeights m = QuantizedWeights::sized(rows, cols, group, spec.bits, spec.scale_dtype, spec.symmetric);
  // Rows are independent, so threads give the same bytes as one: a 27B's matrices take minutes
  // on one core.
  for_ranges(rows, threads_for(rows, static_cast<double>(cols)),
                              [&](int64_t b, int64_t e) { return quantize_rows(w, m, spec, b, e, tensor); });
  return m;
}

} // namespace ninfer
