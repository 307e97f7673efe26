/* Op contract: sample — stochastic token selection (temperature, top-k, top-p, min-p) on the
 * device, so a sampled decode step moves token ids to the host instead of whole logits rows.
 * The selection is defined in exact integer arithmetic so that every plugin (CPU reference,
 * CUDA) picks the SAME id for the same inputs; the helpers it names are in sample_math.h.
 *
 * Math, for every row r in [0, rows), with l = logits row r, V = vocab, P = params[r]:
 *  0. Invalid row: any l[j] NaN or +inf, or every l[j] = -inf  =>  ids[r] = -1, logprob NaN.
 *  1. logprob[r] = l[id] - log(sum_j exp(l[j]))  (the RAW distribution, as argmax reports it).
 *  2. Greedy: if ninfer_sample_greedy(P.temperature) (below NINFER_SAMPLE_MIN_TEMPERATURE = 1e-5,
 *     or NaN), id = the smallest j with l[j] = max l (ties: lowest id).
 *  3. Weights: m = max l; inv_t = 1.0 / P.temperature (double);
 *       x_j = ((double)l[j] - (double)m) * inv_t;   w_j = ninfer_sample_exp(x_j)   (w_j in [0, 1])
 *       W_j = (uint64)(w_j * 2^s)  with s = ninfer_sample_shift(V) = 63 - ceil(log2 V)
 *     so every sum of W fits in 64 bits; the max token has W = 2^s. Sums below are exact.
 *  4. Ranking: logit descending, ties by id ascending (-0.0 == +0.0).
 *  5. top-k: k = P.top_k if 0 < top_k < V, else V (off). The top-k set is the first k ranks.
 *  6. top-p (on iff P.top_p < 1): S_k = sum of W over the top-k set;
 *       target = max(1, (uint64)ceil(P.top_p * (double)S_k));
 *     rank i of the top-k set is kept while (sum of W of ranks before i) < target: the smallest
 *     head whose mass reaches top_p (rank 0 is always kept). Otherwise the head is the top-k set.
 *  7. min-p (on iff P.min_p > 0): keep tokens with w_j >= min(P.min_p, 1) (p_j >= min_p * p_max).
 *     Tokens with W_j = 0 are dropped. The kept set is head ∩ min-p ∩ {W > 0}; it holds rank 0.
 *  8. Draw: u64 = ninfer_sample_draw(P.seed, P.counter); S = sum of W over the kept set;
 *       U = floor(u64 * S / 2^64)   (in [0, S));
 *     id = the first kept token in ID order whose inclusive running sum of W exceeds U.
 * This is the host sampler's pipeline (core/sampling: temperature, top-k, top-p over the top-k
 * distribution, min-p, inverse CDF in id order) with float64 probabilities replaced by 2^-s
 * fixed point; a token loses at most 2^-s of relative weight.
 *
 * Shapes: logits [rows, vocab] float32 with row stride row_stride; params [rows] (in the
 * backend's memory); ids [rows] int32; logprob [rows] float32 or NULL. vocab <= 2^30.
 * Planning shape: tokens = rows, dims[0] = vocab, dtype = F32.
 * Effects: writes ids (and logprob) of the launch's rows. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_SAMPLE_H
#define NINFER_ABI_OPS_SAMPLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_SAMPLE "sample"

/* One row's sampling parameters (48 bytes, no padding surprises between compilers). */
typedef struct ninfer_sample_row {
  double temperature; /* < NINFER_SAMPLE_MIN_TEMPERATURE (or NaN): greedy */
  double top_p;       /* >= 1 (or NaN): off */
  double min_p;       /* <= 0: off; > 1 acts as 1 */
  uint64_t seed;
  uint64_t counter; /* the row's draw index: step k of a sequence uses counter k */
  int32_t top_k;    /* <= 0 or >= vocab: off */
  int32_t reserved; /* 0 */
} ninfer_sample_row;

typedef struct ninfer_sample_args {
  const float* logits;
  int64_t row_stride;
  const ninfer_sample_row* params; /* [rows] */
  int32_t* ids;
  float* logprob; /* may be NULL */
  int64_t rows;
  int32_t vocab;
} ninfer_sample_args;

#ifdef __cplusplus
}
#endif

#endif
