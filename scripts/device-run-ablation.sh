#!/usr/bin/env bash
# Runs on the device: what each op class costs inside a graph-replayed decode step. Each line
# benches decode with the named ops not launched (NINFER_TIMING_SKIP_OPS, timing only; the
# results are wrong while it is set), so "baseline minus skipped" is what removing those
# launches from the step could buy at most.
#   bash scripts/device-run-ablation.sh [PRESET...]     default: qwen3-8b qwen3_5-27b
#   SKIPS="SET SET ..." bash scripts/device-run-ablation.sh PRESET   other skip sets (each a comma list;
#     op@D0xD1 names one shape, e.g. SKIPS="linear@4096x4096 linear@12288x4096": the 8B's o and down)
#   CONTEXT=N: decode at context depth N instead of 0
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
ensure_bundle
bench="$n/ninfer/bin/ninfer-bench"
small_dense="rms_norm,silu_mul,head_norm_rope,head_norm_rope_append,head_norm_rope_append_attention,kv_append,attention,embedding,argmax,sample,rope"
small_gdn="gdn_gating,causal_conv1d,l2_norm,gated_delta_rule,gated_rms_norm,sigmoid_gate,conv_l2_norm,gated_delta_step"
for p in ${@:-qwen3-8b qwen3_5-27b}; do
  step "$p decode, batch 1, context ${CONTEXT:-0}: tok/s with these ops skipped"
  sets=("" rms_norm silu_mul head_norm_rope,head_norm_rope_append,kv_append attention "$small_dense" "$small_dense,$small_gdn" "$small_gdn" linear)
  [[ -n "${SKIPS:-}" ]] && read -r -a sets <<< "none ${SKIPS}"
  for skip in "${sets[@]}"; do
    [[ "$skip" == none ]] && skip=""
    rate=$(NINFER_TIMING_SKIP_OPS="$skip" "$bench" --preset "$p" --device cuda --skip-prefill --contexts "${CONTEXT:-0}" \
      --batches 1 --repeats 3 --decode-steps 64 --json 2>/dev/null |
      python3 -c 'import json,sys; r=[r for r in json.load(sys.stdin)["results"] if r["phase"]=="decode"][0]; print("%.1f tok/s = %.3f ms/step (%.0f%% of roofline)" % (r["tok_s"], 1e3/r["tok_s"], 100*r["fraction_of_roofline"]))' 2>&1 | tail -1)
    echo "skip=[${skip:-none}] $rate"
  done
done
