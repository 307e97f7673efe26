/* A quantized weight matrix in ninfer's one canonical layout (its codes row-major, or the same
 * bytes in tiles of 16 rows where the backend's decode reads them so): what `linear` and
 * `norm_linear` read when their w_dtype is NINFER_DTYPE_INT4, NINFER_DTYPE_INT8 or
 * NINFER_DTYPE_FP8_E4M3.
 *
 * Every published layout (GPTQ, AWQ, compressed-tensors pack-quantized, FP8 block) is repacked
 * into this one at load (docs/quantization.md), so a kernel reads one layout whatever the
 * checkpoint, and the row-stacked projections (q|k|v, gate|up, qkv|z) stay a plain
 * concatenation of rows.
 *
 * The matrix W is [N, K]: N = out_features rows, K = in_features columns (PyTorch nn.Linear
 * layout: row n produces output n). With G = ceil(K / group_size) groups per row:
 *
 *   codes  (the op's `w`)  [N, K] in `layout`; NINFER_QUANT_LAYOUT_ROWS: row-major, one row every
 *          row_bytes bytes:
 *            INT4: two codes per byte along K, the even k in the low nibble, the odd k in the
 *                  high nibble; row_bytes = ceil(K / 2) (an odd K leaves the last high nibble 0)
 *            INT8, FP8_E4M3: one code per byte; row_bytes = K
 *          integer codes are unsigned: u in [0, 2^bits)
 *          NINFER_QUANT_LAYOUT_TILES16 (K a multiple of 128; the matrix allocated in whole bands
 *          of 16 rows, of which a call may take the first N rows): the same bytes,
 *          moved so that a 16-row, 128-column tile is one block. A row's bytes of columns
 *          [128 s, 128 s + 128) (its "piece": piece_bytes = 128 * bits / 8, 64 for INT4) are at
 *            (n / 16) * 16 * row_bytes + s * 16 * piece_bytes + (n % 16) * piece_bytes
 *          so rows 16 b .. 16 b + 15 (band b) are 16 * row_bytes bytes of their own, a piece
 *          after piece in K order, the 16 rows' pieces of one step side by side. A decode GEMV
 *          whose warp reads 16 rows a step then reads one contiguous block, not 16 short runs a
 *          row apart (docs/quantization.md, "Code tiles").
 *   scales [N, G] row-major, in scale_dtype (F32, BF16 or F16: as the checkpoint stored them, so
 *          dequantization is exact)
 *   zeros  [N, G] row-major uint8 zero points (integer dtypes only), or NULL: symmetric, every
 *          zero is 2^(bits - 1) (8 for INT4, 128 for INT8). A zero may be 2^bits (GPTQ's v1
 *          format stores zero - 1, and a stored 2^bits - 1 reads back so); it still fits a byte
 *          for INT4, and the loader refuses one for INT8.
 *   g_idx  [K] int32: the group of input channel k, in [0, G) (GPTQ's act-order checkpoints map
 *          channels to groups in any order), or NULL: g(k) = k / group_size
 *
 * Dequantized weight:
 *   INT4, INT8:  W[n, k] = (u(n, k) - zero(n, g(k))) * scale(n, g(k))
 *   FP8_E4M3:    W[n, k] = e4m3(u(n, k)) * scale(n, g(k))       (zeros must be NULL)
 * The product is exact in float32 for F16 and BF16 scales (their significands times a code of at
 * most 9 bits fit 24 bits), and one float32 rounding of it for F32 scales.
 * e4m3 is the OCP float8 e4m3fn value of the byte (no infinities; 0x7f and 0xff are NaN).
 * FP8 block scales [ceil(N / bn), ceil(K / bk)] are expanded at load to per-row scales
 * [N, ceil(K / bk)] with group_size = bk.
 *
 * All pointers are in the backend's memory (device memory for a CUDA plugin), valid for the
 * call; nothing here is written.
 */
#ifndef NINFER_ABI_OPS_QUANT_WEIGHT_H
#define NINFER_ABI_OPS_QUANT_WEIGHT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_QUANT_LAYOUT_ROWS 0
#define NINFER_QUANT_LAYOUT_TILES16 1
#define NINFER_QUANT_TILE_ROWS 16
#define NINFER_QUANT_TILE_COLS 128

typedef struct ninfer_quant_weight {
  const void* scales;   /* [N, G] in scale_dtype */
  const uint8_t* zeros; /* [N, G], or NULL (symmetric) */
  const int32_t* g_idx; /* [K], or NULL (g(k) = k / group_size) */
  int32_t scale_dtype;  /* ninfer_dtype: F32, BF16 or F16 */
  int32_t group_size;   /* columns per group along K, >= 1 */
  int32_t layout;       /* NINFER_QUANT_LAYOUT_*: the codes' (ABI 10; 0, rows, where left out) */
} ninfer_quant_weight;

/* The planning shape's dims[2] of linear on weights described by `wq` (linear.h): the group
 * size when every group is group_size consecutive columns (no g_idx), else 0 (float weights, or a
 * g_idx mapping), so a variant that needs whole groups per load can tell from the shape. */
/* The planning shape's dims[3] of linear on weights described by `wq`: their codes' layout
 * (NINFER_QUANT_LAYOUT_ROWS for float weights), so a variant that reads one layout only refuses
 * the other in `supports`. */
#ifndef __CUDACC_RTC__ /* host only: NVRTC (cuda-generic) takes no function without an execution space */
static inline int64_t ninfer_quant_planning_group(const ninfer_quant_weight* wq) {
  return wq && !wq->g_idx ? wq->group_size : 0;
}
static inline int64_t ninfer_quant_planning_layout(const ninfer_quant_weight* wq) {
  return wq ? wq->layout : NINFER_QUANT_LAYOUT_ROWS;
}
/* Whether an [N, K] matrix's codes can be in NINFER_QUANT_LAYOUT_TILES16. */
static inline int ninfer_quant_tiles_fit(int64_t N, int64_t K) {
  return N > 0 && K > 0 && N % NINFER_QUANT_TILE_ROWS == 0 && K % NINFER_QUANT_TILE_COLS == 0;
}
/* Where byte `b` of row n's row-major codes (row_bytes a row) lies in NINFER_QUANT_LAYOUT_TILES16,
 * piece_bytes = 128 * bits / 8. */
static inline int64_t ninfer_quant_tile_offset(int64_t n, int64_t b, int64_t row_bytes, int64_t piece_bytes) {
  return n / NINFER_QUANT_TILE_ROWS * NINFER_QUANT_TILE_ROWS * row_bytes +
         b / piece_bytes * NINFER_QUANT_TILE_ROWS * piece_bytes + n % NINFER_QUANT_TILE_ROWS * piece_bytes +
         b % piece_bytes;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
