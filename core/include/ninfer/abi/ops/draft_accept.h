/* Op contract: draft_accept — greedy verification of a speculative round's drafts on the device
 * (docs/speculative.md), so how many drafts each sequence keeps never goes through the host
 * before the step's state is settled.
 *
 * A round verifies `seqs` sequences of drafts + 1 tokens each, laid out sequence after sequence:
 * sequence i's tokens are rows i*(drafts+1) .. i*(drafts+1) + drafts of the verification pass,
 * its input first, then its drafts. For every sequence i, with D = drafts + 1:
 *   proposed[j] = ids[i*D + 1 + j]     j < drafts     (the drafts, as the pass read them)
 *   target[j]   = picks[i*D + j]       j <= drafts    (the model's greedy choice after each row)
 *   accepted[i] = the largest n <= drafts with proposed[j] == target[j] for every j < n
 *   keep_row[i] = i*D + accepted[i]   (the last row whose input the sequence keeps: its state,
 *                                      hidden state and pick are the round's results)
 * The tokens the sequence gains are target[0 .. accepted[i]]: the accepted drafts and the model's
 * own next token. A pick of -1 (a row holding NaN) never equals a draft.
 *
 * Shapes: ids, picks [seqs * (drafts+1)] int32; accepted, keep_row [seqs] int32 (keep_row may
 * be NULL). Planning shape: tokens = seqs, dims[0] = drafts, dtype = F32.
 *
 * Ordering: ids and picks are written by the ops right before this one (the pass's argmax): a
 * variant reads them after its launch wait.
 *
 * Effects: writes accepted and keep_row of every sequence. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_DRAFT_ACCEPT_H
#define NINFER_ABI_OPS_DRAFT_ACCEPT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_DRAFT_ACCEPT "draft_accept"

typedef struct ninfer_draft_accept_args {
  const int32_t* ids;
  const int32_t* picks;
  int32_t* accepted;
  int32_t* keep_row; /* may be NULL */
  int32_t seqs;
  int32_t drafts;
} ninfer_draft_accept_args;

#ifdef __cplusplus
}
#endif

#endif
