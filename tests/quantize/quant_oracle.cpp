#include "quant_oracle.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ninfer::test {

namespace {

uint64_t little_endian(const std::string& bytes, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t b = 0; b < n; ++b) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + b])) << (8 * b);
  return v;
}

// IEEE binary16 from its definition: sign, 5-bit exponent (bias 15), 10-bit fraction.
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(frac, -24);
  else if (exp == 31) v = frac ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(1024 + frac, exp - 25);
  return sign ? -v : v;
}

double bf16_value(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

} // namespace

double raw_value(const RawTensor& t, size_t i) {
  if (t.dtype == "F32") {
    const uint32_t x = static_cast<uint32_t>(little_endian(t.bytes, 4 * i, 4));
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  if (t.dtype == "BF16") return bf16_value(static_cast<uint16_t>(little_endian(t.bytes, 2 * i, 2)));
  if (t.dtype == "F16") return half_value(static_cast<uint16_t>(little_endian(t.bytes, 2 * i, 2)));
  if (t.dtype == "I32") return static_cast<int32_t>(little_endian(t.bytes, 4 * i, 4));
  if (t.dtype == "I64") return static_cast<double>(static_cast<int64_t>(little_endian(t.bytes, 8 * i, 8)));
  throw std::runtime_error("test: raw_value of dtype " + t.dtype);
}

std::vector<double> raw_values(const RawTensor& t) {
  size_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<size_t>(d);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = raw_value(t, i);
  return v;
}

uint32_t raw_u32(const RawTensor& t, size_t i) { return static_cast<uint32_t>(little_endian(t.bytes, 4 * i, 4)); }

double round_to_format(double x, const std::string& dtype) {
  if (x == 0 || !std::isfinite(x)) return x;
  int mant_bits, min_exp;
  double max;
  if (dtype == "F16") mant_bits = 10, min_exp = -14, max = 65504;
  else if (dtype == "BF16") mant_bits = 7, min_exp = -126, max = 0x1.FEp127;
  else mant_bits = 23, min_exp = -126, max = std::numeric_limits<float>::max();
  int e;
  std::frexp(std::fabs(x), &e); // |x| in [2^(e-1), 2^e)
  const int binade = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, binade - mant_bits);
  const double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > max) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

Dequantized dequantize_compressed_tensors(const RawTensors& t, const std::string& module, int bits) {
  const RawTensor& packed = t.at(module + ".weight_packed");
  const RawTensor& scale = t.at(module + ".weight_scale");
  const RawTensor& shape = t.at(module + ".weight_shape");
  if (packed.dtype != "I32" || shape.dtype != "I64") throw std::runtime_error("test: " + module + ": dtypes");
  Dequantized d;
  d.rows = static_cast<int64_t>(raw_value(shape, 0));
  d.cols = static_cast<int64_t>(raw_value(shape, 1));
  const int per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t groups = scale.shape.at(1), group = d.cols / groups;
  if (packed.shape != std::vector<int64_t>{d.rows, d.cols / per} || scale.shape.at(0) != d.rows)
    throw std::runtime_error("test: " + module + ": packed or scale shape disagrees with weight_shape");
  // Asymmetric: weight_zero_point [ceil(N / per), G], output n at bits bits·(n % per) of word n / per.
  const auto zp = t.find(module + ".weight_zero_point");
  const auto g_idx = t.find(module + ".weight_g_idx");
  if (zp != t.end() && zp->second.shape != std::vector<int64_t>{(d.rows + per - 1) / per, groups})
    throw std::runtime_error("test: " + module + ": weight_zero_point shape");
  if (g_idx != t.end() && g_idx->second.shape != std::vector<int64_t>{d.cols})
    throw std::runtime_error("test: " + module + ": weight_g_idx shape");
  d.w.resize(static_cast<size_t>(d.rows * d.cols));
  d.step.resize(d.w.size());
  for (int64_t n = 0; n < d.rows; ++n)
    for (int64_t k = 0; k < d.cols; ++k) {
      const uint32_t word = raw_u32(packed, static_cast<size_t>(n * (d.cols / per) + k / per));
      const int stored = static_cast<int>((word >> (bits * (k % per))) & mask);
      const int64_t g = g_idx != t.end() ? static_cast<int64_t>(raw_value(g_idx->second, static_cast<size_t>(k))) : k / group;
      const int zero = zp != t.end()
                           ? static_cast<int>((raw_u32(zp->second, static_cast<size_t>((n / per) * groups + g)) >>
                                               (bits * (n % per))) & mask)
                           : 1 << (bits - 1);
      const double s = raw_value(scale, static_cast<size_t>(n * groups + g));
      d.w[static_cast<size_t>(n * d.cols + k)] = (stored - zero) * s;
      d.step[static_cast<size_t>(n * d.cols + k)] = s;
    }
  return d;
}

Dequantized dequantize_gptq(const RawTensors& t, const std::string& module, int bits) {
  const RawTensor& qweight = t.at(module + ".qweight");
  const RawTensor& qzeros = t.at(module + ".qzeros");
  const RawTensor& scales = t.at(module + ".scales");
  const RawTensor& g_idx = t.at(module + ".g_idx");
  const int per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  Dequantized d;
  d.rows = qweight.shape.at(1);
  d.cols = qweight.shape.at(0) * per;
  if (g_idx.shape != std::vector<int64_t>{d.cols} || scales.shape.at(1) != d.rows ||
      qzeros.shape != std::vector<int64_t>{scales.shape.at(0), d.rows / per})
    throw std::runtime_error("test: " + module + ": GPTQ tensor shapes disagree");
  d.w.resize(static_cast<size_t>(d.rows * d.cols));
  d.step.resize(d.w.size());
  for (int64_t k = 0; k < d.cols; ++k) {
    const int64_t g = static_cast<int64_t>(raw_value(g_idx, static_cast<size_t>(k)));
    for (int64_t n = 0; n < d.rows; ++n) {
      const uint32_t word = raw_u32(qweight, static_cast<size_t>((k / per) * d.rows + n));
      const int q = static_cast<int>((word >> (bits * (k % per))) & mask);
      const uint32_t zword = raw_u32(qzeros, static_cast<size_t>(g * (d.rows / per) + n / per));
      const int z = static_cast<int>((zword >> (bits * (n % per))) & mask) + 1; // v1 stores zero − 1
      const double s = raw_value(scales, static_cast<size_t>(g * d.rows + n));
      d.w[static_cast<size_t>(n * d.cols + k)] = (q - z) * s;
      d.step[static_cast<size_t>(n * d.cols + k)] = s;
    }
  }
  return d;
}

OracleQuant oracle_quantize(const std::vector<double>& w, int64_t rows, int64_t cols, int bits, int64_t group,
                            const std::string& scale_dtype) {
  OracleQuant o;
  o.rows = rows, o.cols = cols, o.group = group, o.bits = bits;
  const int qmax = (1 << (bits - 1)) - 1;
  o.q.resize(static_cast<size_t>(rows * cols));
  o.scales.resize(static_cast<size_t>(rows * (cols / group)));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t g = 0; g < cols / group; ++g) {
      double absmax = 0;
      for (int64_t k = 0; k < group; ++k) absmax = std::max(absmax, std::fabs(w[static_cast<size_t>(n * cols + g * group + k)]));
      double s = 1;
      if (absmax > 0) {
        const double f32 = static_cast<float>(static_cast<float>(absmax) / static_cast<float>(qmax));
        s = round_to_format(f32, scale_dtype);
        while (s == 0 || absmax / s > qmax + 0.5) {
          // The dtype's next value: one quantum of s's binade (the smallest subnormal from 0).
          const double tiny = round_to_format(std::ldexp(1.0, scale_dtype == "F16" ? -24 : scale_dtype == "BF16" ? -133 : -149), scale_dtype);
          double next = s == 0 ? tiny : s;
          for (double d = s == 0 ? 0 : s * 0x1p-24; next == s; d *= 2) next = round_to_format(s + d, scale_dtype);
          s = next;
        }
      }
      o.scales[static_cast<size_t>(n * (cols / group) + g)] = s;
      for (int64_t k = 0; k < group; ++k) {
        const size_t i = static_cast<size_t>(n * cols + g * group + k);
        const double r = std::nearbyint(w[i] / s);
        o.q[i] = static_cast<int>(std::max<double>(-qmax, std::min<double>(qmax, r)));
      }
    }
  return o;
}

std::vector<uint32_t> oracle_pack_compressed_tensors(const OracleQuant& q) {
  const int per = 32 / q.bits;
  std::vector<uint32_t> out(static_cast<size_t>(q.rows * q.cols / per), 0);
  for (int64_t n = 0; n < q.rows; ++n)
    for (int64_t k = 0; k < q.cols; ++k) {
      const uint32_t stored = static_cast<uint32_t>(q.q[static_cast<size_t>(n * q.cols + k)] + (1 << (q.bits - 1)));
      out[static_cast<size_t>(n * (q.cols / per) + k / per)] |= stored << (q.bits * (k % per));
    }
  return out;
}

std::vector<uint32_t> oracle_pack_gptq_qweight(const OracleQuant& q) {
  const int per = 32 / q.bits;
  std::vector<uint32_t> out(static_cast<size_t>(q.cols / per * q.rows), 0);
  for (int64_t k = 0; k < q.cols; ++k)
    for (int64_t n = 0; n < q.rows; ++n) {
      const uint32_t stored = static_cast<uint32_t>(q.q[static_cast<size_t>(n * q.cols + k)] + (1 << (q.bits - 1)));
      out[static_cast<size_t>((k / per) * q.rows + n)] |= stored << (q.bits * (k % per));
    }
  return out;
}

} // namespace ninfer::test
