/* The exact arithmetic the sample op (sample.h) is defined with, shared by every plugin and by
 * the host sampler, so all of them draw the same numbers and weigh tokens identically.
 *
 * Everything here uses only IEEE-754 operations that are correctly rounded on every target
 * (+, -, *, /, rint, fma written out explicitly, integer ops): no libm exp/log, whose last bit
 * differs between glibc and CUDA, and no expression a compiler may contract into an fma.
 * C++ (host) and CUDA (device) only.
 */
#ifndef NINFER_ABI_OPS_SAMPLE_MATH_H
#define NINFER_ABI_OPS_SAMPLE_MATH_H

#include <stdint.h>
#include <string.h>

#include <cmath>

#ifdef __CUDACC__
#define NINFER_SAMPLE_HD __host__ __device__ __forceinline__
#else
#define NINFER_SAMPLE_HD inline
#endif

/* Temperatures below this pick greedily (sample.h step 2): softmax(l / T) tends to the argmax as
 * T -> 0, and near T = 5e-309 the contract's 1 / T overflows to infinity, whose product with the
 * max token's 0 is NaN. vLLM draws the same line. */
#define NINFER_SAMPLE_MIN_TEMPERATURE 1e-5

/* Whether a row with this temperature is greedy: below NINFER_SAMPLE_MIN_TEMPERATURE, or NaN. */
NINFER_SAMPLE_HD bool ninfer_sample_greedy(double temperature) {
  return !(temperature >= NINFER_SAMPLE_MIN_TEMPERATURE);
}

/* The splitmix64 finaliser: a bijective 64-bit mix. */
NINFER_SAMPLE_HD uint64_t ninfer_sample_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Draw number `counter` of the stream `seed`: a counter-based generator (no state), so a draw
 * depends only on (seed, counter) wherever it is computed. */
NINFER_SAMPLE_HD uint64_t ninfer_sample_draw(uint64_t seed, uint64_t counter) {
  const uint64_t key = ninfer_sample_mix(seed ^ 0x5851F42D4C957F2Dull);
  return ninfer_sample_mix(key + (counter + 1) * 0x9E3779B97F4A7C15ull);
}

/* floor(a * b / 2^64). */
NINFER_SAMPLE_HD uint64_t ninfer_sample_mulhi(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

/* Fixed-point shift s = 63 - ceil(log2(vocab)): vocab weights of at most 2^s sum below 2^63. */
NINFER_SAMPLE_HD int ninfer_sample_shift(int32_t vocab) {
  int c = 0;
  while ((int64_t{1} << c) < vocab) ++c;
  return 63 - c;
}

NINFER_SAMPLE_HD double ninfer_sample_fma(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

NINFER_SAMPLE_HD double ninfer_sample_rint(double x) {
#ifdef __CUDA_ARCH__
  return rint(x);
#else
  return std::rint(x); /* the default rounding mode: to nearest even */
#endif
}

/* 2^n for n in [-1022, 1023], built from its bits (exact). */
NINFER_SAMPLE_HD double ninfer_sample_pow2(int n) {
  const uint64_t bits = static_cast<uint64_t>(1023 + n) << 52;
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
#endif
}

/* exp(x) for x <= 0, within ~2 ulp, bit-identical on host and device; 0 for x < -50 (a weight
 * below 2^-72 rounds to 0 at every fixed-point shift) and for NaN / -inf. */
NINFER_SAMPLE_HD double ninfer_sample_exp(double x) {
  if (!(x >= -50.0)) return 0.0;
  if (x > 0.0) x = 0.0;
  const double n = ninfer_sample_rint(x * 1.4426950408889634);  /* 1/ln2 */
  double r = ninfer_sample_fma(-n, 0.6931471805599453, x);       /* ln2, rounded */
  r = ninfer_sample_fma(-n, 2.3190468138462996e-17, r);          /* ln2 - that rounding */
  /* Taylor series to r^13 (|r| <= 0.347: the remainder is below 1e-17). */
  double p = 1.6059043836821613e-10;                               /* 1/13! */
  p = ninfer_sample_fma(p, r, 2.08767569878681e-09);               /* 1/12! */
  p = ninfer_sample_fma(p, r, 2.505210838544172e-08);              /* 1/11! */
  p = ninfer_sample_fma(p, r, 2.755731922398589e-07);              /* 1/10! */
  p = ninfer_sample_fma(p, r, 2.7557319223985893e-06);             /* 1/9! */
  p = ninfer_sample_fma(p, r, 2.48015873015873e-05);               /* 1/8! */
  p = ninfer_sample_fma(p, r, 1.984126984126984e-04);              /* 1/7! */
  p = ninfer_sample_fma(p, r, 1.388888888888889e-03);              /* 1/6! */
  p = ninfer_sample_fma(p, r, 8.333333333333333e-03);              /* 1/5! */
  p = ninfer_sample_fma(p, r, 4.1666666666666664e-02);             /* 1/4! */
  p = ninfer_sample_fma(p, r, 1.6666666666666666e-01);             /* 1/3! */
  p = ninfer_sample_fma(p, r, 0.5);
  p = ninfer_sample_fma(p, r, 1.0);
  p = ninfer_sample_fma(p, r, 1.0);
  return p * ninfer_sample_pow2(static_cast<int>(n));
}

/* The fixed-point weight W = (uint64)(w * 2^shift) of a token of relative weight w in [0, 1]. */
NINFER_SAMPLE_HD uint64_t ninfer_sample_fixed(double w, int shift) {
  return static_cast<uint64_t>(w * ninfer_sample_pow2(shift));
}

/* A 32-bit key whose unsigned order is the float order (-0.0 and +0.0 share a key). For
 * finite and -inf values only. */
NINFER_SAMPLE_HD uint32_t ninfer_sample_key(float f) {
  if (f == 0.0f) f = 0.0f;
  uint32_t b;
#ifdef __CUDA_ARCH__
  b = static_cast<uint32_t>(__float_as_uint(f));
#else
  memcpy(&b, &f, sizeof b);
#endif
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

NINFER_SAMPLE_HD float ninfer_sample_key_value(uint32_t key) {
  const uint32_t b = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
#endif
}

/* The fixed-point weight of a token with logit `l` in a row of max `m` at 1/temperature `inv_t`. */
NINFER_SAMPLE_HD double ninfer_sample_weight(float l, float m, double inv_t) {
  return ninfer_sample_exp((static_cast<double>(l) - static_cast<double>(m)) * inv_t);
}

#endif
