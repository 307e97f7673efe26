#include "ninfer/planning/op_catalog.hpp"

#include <fmt/format.h>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/argmax.h"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/copy_rows.h"
#include "ninfer/abi/ops/draft_accept.h"
#include "ninfer/abi/ops/embedding.h"
#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/gated_rms_norm.h"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/ops/l2_norm.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "ninfer/abi/ops/rope.h"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/abi/ops/sigmoid_gate.h"
#include "ninfer/abi/ops/silu_mul.h"
#include "ninfer/abi/plugin_abi.h"
#include "ninfer/support/error.hpp"

namespace ninfer {

namespace {

std::vector<OpInfo> with_routes(std::vector<OpInfo> ops) {
  for (OpInfo& op : ops) {
    for (const char* fused : {NINFER_OP_NORM_LINEAR, NINFER_OP_HEAD_NORM_ROPE, NINFER_OP_HEAD_NORM_ROPE_APPEND,
                              NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, NINFER_OP_CONV_L2_NORM,
                              NINFER_OP_GATED_DELTA_STEP})
      op.unfused_form |= op.name == fused;
    op.one_token_per_sequence |= op.name == NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION;
  }
  return ops;
}

} // namespace

const std::vector<OpInfo>& op_catalog() {
  static const std::vector<OpInfo> ops = with_routes({
      {NINFER_OP_GDN_GATING,
       "Gated DeltaNet gating projection: g = -exp(A_log)*softplus(x.W_a^T + dt_bias), "
       "beta = sigmoid(x.W_b^T)",
       {"hidden", "heads"},
       {5120, 48, 0, 0}, // Qwen3.5-27B: hidden 5120, 48 linear-attention value heads
       NINFER_DTYPE_BF16},
      // The model ops. Default dims are Qwen3.5-27B's (hidden 5120, 24 query / 4 KV heads of
      // 256, GDN 16 key / 48 value heads of 128, conv kernel 4, MLP 17408, vocab 248320).
      {NINFER_OP_EMBEDDING, "token embedding gather: out[t] = table[ids[t]]", {"dim", "vocab"},
       {5120, 248320, 0, 0}, NINFER_DTYPE_BF16},
      {NINFER_OP_RMS_NORM, "RMSNorm over rows (w or 1+w), optional fused residual add", {"dim", "groups"},
       {5120, 1, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_LINEAR, "dense layer y = x.W^T (W [out, in])", {"in_features", "out_features"},
       {5120, 17408, 0, 0}, NINFER_DTYPE_BF16},
      {NINFER_OP_NORM_LINEAR, "rms_norm of x, then y = xn.W^T, optionally SwiGLU of its two halves",
       {"in_features", "out_features", "gated"}, {5120, 34816, 1, 0}, NINFER_DTYPE_BF16},
      {NINFER_OP_ROPE, "rotary embedding, half-split layout, full or partial, in place",
       {"head_dim", "heads", "rotary_dim"}, {256, 24, 64, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_HEAD_NORM_ROPE, "per-head RMSNorm of q and k heads, then rotary embedding of both, in place",
       {"head_dim", "q_heads", "k_heads", "rotary_dim"}, {256, 24, 4, 64}, NINFER_DTYPE_F32},
      {NINFER_OP_HEAD_NORM_ROPE_APPEND, "head_norm_rope, then kv_append of the new k and v rows, in one call",
       {"head_dim", "q_heads", "k_heads", "rotary_dim"}, {256, 24, 4, 64}, NINFER_DTYPE_F32},
      // Qwen3-8B's dims here: the CUDA plugins fuse the 128-dim heads only.
      {NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION,
       "head_norm_rope_append, then attention over the cache, in one decode call (one token per sequence)",
       {"head_dim", "heads", "kv_heads", "kv_len"}, {128, 32, 8, 4096}, NINFER_DTYPE_BF16},
      {NINFER_OP_KV_APPEND, "write new K/V rows into a slot of the KV cache", {"head_dim", "kv_heads"},
       {256, 4, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_ATTENTION, "causal GQA attention of new tokens over the KV cache",
       {"head_dim", "heads", "kv_heads", "kv_len"}, {256, 24, 4, 4096}, NINFER_DTYPE_F32},
      {NINFER_OP_SIGMOID_GATE, "attention output gate x *= sigmoid(gate), in place", {"head_dim", "heads"},
       {256, 24, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_SILU_MUL, "SwiGLU activation out = silu(gate) * up", {"width"}, {17408, 0, 0, 0},
       NINFER_DTYPE_F32},
      {NINFER_OP_CAUSAL_CONV1D, "GDN depthwise causal conv1d + SiLU with per-slot state",
       {"channels", "kernel"}, {10240, 4, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_CONV_L2_NORM, "causal_conv1d, then L2 norm of its first heads (GDN q, k) in one op",
       {"channels", "kernel", "max_seq_tokens", "norm_dim"}, {10240, 4, 1, 128}, NINFER_DTYPE_F32},
      {NINFER_OP_L2_NORM, "L2-normalise head rows in place (GDN q, k)", {"dim", "heads"}, {128, 16, 0, 0},
       NINFER_DTYPE_F32},
      {NINFER_OP_GATED_DELTA_RULE, "gated delta rule recurrence with per-slot float32 state",
       {"max_seq_tokens", "v_heads", "k_dim", "v_dim"}, {4096, 48, 128, 128}, NINFER_DTYPE_F32},
      {NINFER_OP_GATED_DELTA_STEP,
       "GDN decode / verification step: gating from the raw projections, delta-rule updates, gated output norm",
       {"v_heads", "k_dim", "v_dim", "k_heads"}, {48, 128, 128, 16}, NINFER_DTYPE_F32},
      {NINFER_OP_GATED_RMS_NORM, "GDN output norm: rmsnorm(x) * w * silu(z) per head", {"dim", "heads"},
       {128, 48, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_ARGMAX, "greedy token of each logits row (+ its log-probability) on the device", {"vocab"},
       {151936, 0, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_SAMPLE,
       "sampled token of each logits row (temperature, top-k, top-p, min-p; seeded, + its log-probability) "
       "on the device",
       {"vocab"}, {248320, 0, 0, 0}, NINFER_DTYPE_F32},
      // A speculative round of batch 4 with 3 drafts committing Qwen3.5-27B's recurrent state of
      // one Gated DeltaNet layer per slot (48 heads x 128 x 128 float32 words).
      {NINFER_OP_COPY_ROWS, "rows of 32-bit words copied at indices held on the device (speculative rollback)",
       {"width"}, {786432, 0, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_DRAFT_ACCEPT,
       "greedy acceptance of a speculative round's drafts: per sequence the drafts the model's picks repeat",
       {"drafts"}, {3, 0, 0, 0}, NINFER_DTYPE_F32},
      {NINFER_OP_FILL_RANDOM, "seeded uniform fill of a buffer (benchmark weights built on the device)", {},
       {0, 0, 0, 0}, NINFER_DTYPE_BF16},
  });
  return ops;
}

const OpInfo* find_op(std::string_view name) {
  for (const auto& op : op_catalog())
    if (op.name == name) return &op;
  return nullptr;
}

const OpInfo& require_op(std::string_view name) {
  if (const OpInfo* op = find_op(name)) return *op;
  std::string known;
  for (const auto& op : op_catalog()) known += (known.empty() ? "" : ", ") + op.name;
  throw Error(fmt::format("unknown op '{}'; registered ops: {} (see ninfer-info --list-ops)", name, known));
}

} // namespace ninfer
