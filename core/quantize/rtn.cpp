#include "ninfer/quantize/rtn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "ninfer/support/error.hpp"

namespace ninfer {

int rtn_qmax(int bits) { return (1 << (bits - 1)) - 1; }

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  const int exp = static_cast<int>(abs >> 23) - 127;
  if (exp > 15) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t mant = (abs & 0x7fffffu) | 0x800000u; // 24 significant bits
  int shift;                                     // bits of mant dropped
  uint32_t biased;
  if (exp >= -14) {
    shift = 13;
    biased = static_cast<uint32_t>(exp + 15);
  } else {
    shift = 13 + (-14 - exp); // subnormal: fewer bits remain
    if (shift > 24) return sign;
    biased = 0;
  }
  uint32_t kept = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) ++kept;
  // A normal's implicit bit sits at bit 10 of kept; a carry out of the mantissa moves the
  // exponent up, which adding the fields below does on its own.
  uint32_t h = biased == 0 ? kept : ((biased << 10) + (kept - 0x400u));
  if (h >= 0x7c00u) h = 0x7c00u;
  return static_cast<uint16_t>(sign | h);
}

namespace {

float round_to_dtype(float v, DType d) {
  switch (d) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    case DType::F32: return v;
    default: break; // scales are only ever float (plan_module refuses other weights)
  }
  return v;
}

// The next value above positive `v` that `d` represents.
float next_up(float v, DType d) {
  switch (d) {
    case DType::BF16: return bf16_to_f32(static_cast<uint16_t>(f32_to_bf16(v) + 1));
    case DType::F16: return f16_to_f32(static_cast<uint16_t>(f32_to_f16(v) + 1));
    case DType::F32: return std::nextafter(v, INFINITY);
    default: break;
  }
  return v;
}

} // namespace

namespace {

// Rows [begin, end) of rtn_quantize; returns the first problem instead of throwing, so threads
// can report it.
std::string quantize_rows(const float* w, RtnMatrix& m, int64_t begin, int64_t end, const std::string& tensor) {
  const int qmax = rtn_qmax(m.bits);
  const int64_t cols = m.cols, group = m.group, G = cols / group;
  for (int64_t n = begin; n < end; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const float* x = w + n * cols + g * group;
      float absmax = 0;
      for (int64_t k = 0; k < group; ++k) {
        if (!std::isfinite(x[k]))
          return fmt::format("{}: element [{}, {}] is {}; a weight must be finite to be quantized", tensor, n,
                             g * group + k, x[k]);
        absmax = std::max(absmax, std::fabs(x[k]));
      }
      float s = 1.0f;
      if (absmax > 0) {
        s = round_to_dtype(absmax / static_cast<float>(qmax), m.scale_dtype);
        // Rounding the scale down (or into a subnormal) may push the extreme past qmax + 1/2,
        // where the clamp would cost more than half a step.
        while (s == 0 || static_cast<double>(absmax) / s > qmax + 0.5) s = next_up(s, m.scale_dtype);
        if (!std::isfinite(s))
          return fmt::format("{}: row {} group {} has max |w| = {}, whose scale {} / {} does not fit in {} (largest "
                             "65504); quantize with --format compressed-tensors from a bf16 source or leave this "
                             "module unquantized",
                             tensor, n, g, absmax, absmax, qmax, dtype_name(m.scale_dtype));
      }
      m.scales[static_cast<size_t>(n * G + g)] = s;
      int8_t* q = m.q.data() + n * cols + g * group;
      for (int64_t k = 0; k < group; ++k) {
        const double r = std::nearbyint(static_cast<double>(x[k]) / s); // default mode: half to even
        q[k] = static_cast<int8_t>(std::clamp(r, -static_cast<double>(qmax), static_cast<double>(qmax)));
      }
    }
  }
  return {};
}

} // namespace

RtnMatrix rtn_quantize(const float* w, int64_t rows, int64_t cols, int bits, int64_t group, DType scale_dtype,
                       const std::string& tensor) {
  if (bits != 4 && bits != 8) throw Error(fmt::format("{}: {} bits is not supported (4 or 8)", tensor, bits));
  if (group < 1 || cols % group != 0)
    throw Error(fmt::format("{}: group size {} does not divide its {} input channels", tensor, group, cols));
  RtnMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.bits = bits;
  m.group = group;
  m.scale_dtype = scale_dtype;
  m.q.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(static_cast<size_t>(rows * (cols / group)));
  // Rows are independent, so threads give the same bytes as one: a 27B's matrices take minutes
  // on one core.
  const int64_t threads = std::clamp<int64_t>(std::min<int64_t>(std::thread::hardware_concurrency(), 32), 1,
                                              std::max<int64_t>(1, rows * cols / (1 << 20)));
  std::vector<std::string> problems(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      problems[static_cast<size_t>(t)] = quantize_rows(w, m, rows * t / threads, rows * (t + 1) / threads, tensor);
    });
  for (auto& th : pool) th.join();
  for (const auto& p : problems)
    if (!p.empty()) throw Error(p); // the first row range's, whatever the thread count
  return m;
}

std::vector<uint32_t> pack_compressed_tensors(const RtnMatrix& m) {
  const int per = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1, offset = 1u << (m.bits - 1);
  const int64_t words = m.cols / per;
  std::vector<uint32_t> out(static_cast<size_t>(m.rows * words), 0);
  for (int64_t n = 0; n < m.rows; ++n)
    for (int64_t c = 0; c < words; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < per; ++j) {
        const uint32_t v = static_cast<uint32_t>(m.q[static_cast<size_t>(n * m.cols + c * per + j)] + static_cast<int>(offset));
        word |= (v & mask) << (m.bits * j);
      }
      out[static_cast<size_t>(n * words + c)] = word;
    }
  return out;
}

std::vector<uint32_t> pack_gptq_qweight(const RtnMatrix& m) {
  const int per = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1, offset = 1u << (m.bits - 1);
  const int64_t packed_rows = m.cols / per;
  std::vector<uint32_t> out(static_cast<size_t>(packed_rows * m.rows), 0);
  for (int64_t r = 0; r < packed_rows; ++r)
    for (int64_t n = 0; n < m.rows; ++n) {
      uint32_t word = 0;
      for (int j = 0; j < per; ++j) {
        const uint32_t v = static_cast<uint32_t>(m.q[static_cast<size_t>(n * m.cols + r * per + j)] + static_cast<int>(offset));
        word |= (v & mask) << (m.bits * j);
      }
      out[static_cast<size_t>(r * m.rows + n)] = word;
    }
  return out;
}

std::vector<uint32_t> gptq_qzeros(const RtnMatrix& m) {
  const int per = 32 / m.bits;
  const uint32_t stored = (1u << (m.bits - 1)) - 1; // zero point 2^(bits-1), stored minus one
  uint32_t word = 0;
  for (int j = 0; j < per; ++j) word |= stored << (m.bits * j);
  return std::vector<uint32_t>(static_cast<size_t>(m.groups_per_row() * (m.rows / per)), word);
}

std::vector<float> gptq_scales(const RtnMatrix& m) {
  const int64_t G = m.groups_per_row();
  std::vector<float> out(static_cast<size_t>(G * m.rows));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < m.rows; ++n) out[static_cast<size_t>(g * m.rows + n)] = m.scales[static_cast<size_t>(n * G + g)];
  return out;
}

std::vector<int32_t> gptq_g_idx(const RtnMatrix& m) {
  std::vector<int32_t> out(static_cast<size_t>(m.cols));
  for (int64_t k = 0; k < m.cols; ++k) out[static_cast<size_t>(k)] = static_cast<int32_t>(k / m.group);
  return out;
}

void append_scalar(std::string& out, float v, DType dtype) {
  switch (dtype) {
    case DType::F32: {
      char b[4];
      std::memcpy(b, &v, 4);
      out.append(b, 4);
      return;
    }
    case DType::BF16:
    case DType::F16: {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      out.push_back(static_cast<char>(h & 0xff));
      out.push_back(static_cast<char>(h >> 8));
      return;
    }
    default: break;
  }
  throw Error(fmt::format("quantize: scales cannot be stored as {}", dtype_name(dtype)));
}

} // namespace ninfer
