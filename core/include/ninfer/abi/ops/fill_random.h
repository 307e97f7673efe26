/* Op contract: fill_random — deterministic pseudo-random fill of a buffer on the device, so a
 * benchmark can build a model of any size from a seed without a checkpoint on disk and without
 * moving the weights across the bus.
 *
 * Math, for every element i in [0, count):
 *   h      = mix64(seed ^ (i * 0x9E3779B97F4A7C15))       (mix64: the splitmix64 finaliser)
 *   u      = (h >> 40) * 2^-23 - 1                          (24 random bits: u in [-1, 1))
 *   out[i] = offset + scale * u                             (float32; BF16 rounds to nearest even)
 * where mix64(z): z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 * return z ^ (z >> 31). The value of element i depends only on (seed, i, scale, offset), never on
 * the launch, so every plugin fills the same bits.
 *
 * Quantized codes (dtype INT4, INT8 or FP8_E4M3; quant_weight.h): element i is byte i of `out`
 * (an INT4 byte holds two codes), out[i] = h >> 56: uniform codes, the codes of uniform random
 * weights quantized to nearest. FP8_E4M3 clears bit 6 (out[i] = (h >> 56) & 0xBF): exponents
 * 0..7 only, so every code is finite, of magnitude below 2. `scale` and `offset` are not read.
 *
 * Shapes: out [count] in dtype (F32 or BF16; bytes for the code dtypes). Work is cut into rows of NINFER_FILL_RANDOM_ROW
 * elements (the last may be short). Planning shape: tokens = ceil(count / NINFER_FILL_RANDOM_ROW),
 * dtype = dtype. Effects: writes the elements of the launch's rows. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_FILL_RANDOM_H
#define NINFER_ABI_OPS_FILL_RANDOM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_FILL_RANDOM "fill_random"
#define NINFER_FILL_RANDOM_ROW 4096

typedef struct ninfer_fill_random_args {
  void* out;
  int64_t count;
  uint64_t seed;
  float scale;
  float offset;
  int32_t dtype; /* ninfer_dtype: F32, BF16, or INT4 / INT8 / FP8_E4M3 (random code bytes) */
} ninfer_fill_random_args;

#ifdef __cplusplus
}
#endif

#endif
