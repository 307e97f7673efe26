/* Row buckets: the token counts a library-backed variant (cuBLASLt) treats alike. Such a
 * library picks an algorithm per problem size, and the pick costs host time (a heuristic query,
 * and the first launch of a kernel not loaded yet) that a prompt chunk of a count met for the
 * first time pays before its pass can end. So a variant makes one pick per bucket, for the
 * bucket's top count, and serves every count in the bucket with it; a warm-up that runs one
 * pass at each bucket's top (ninfer-serve's, docs/serving.md) meets every pick before a request
 * does. Exact below 17 rows (decode batches, where the pick changes most), then steps of 16 up
 * to 256, of 64 up to 1,024 and of 256 above. Such a variant hands the library at most
 * NINFER_ROW_BUCKET_MOST rows a call (a launch of more runs in pieces of that many and a
 * remainder), so no count above it is ever met.
 */
#ifndef NINFER_ABI_ROW_BUCKETS_H
#define NINFER_ABI_ROW_BUCKETS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_ROW_BUCKET_MOST 4096

/* The top of the bucket holding `rows` (rows >= 1): the count whose pick serves `rows`. */
static inline int64_t ninfer_row_bucket(int64_t rows) {
  if (rows <= 16) return rows;
  const int64_t step = rows <= 256 ? 16 : rows <= 1024 ? 64 : 256;
  return (rows + step - 1) / step * step;
}

#ifdef __cplusplus
}
#endif

#endif
