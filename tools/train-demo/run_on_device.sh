#!/usr/bin/env bash
# Makes the demo model in one device call, from the repository root, on a machine with python3,
# torch, transformers and tokenizers (no network needed):
#   bash tools/train-demo/run_on_device.sh OUT [TRAIN_SECONDS]
# It reads the corpus tarballs that fetch_corpus.sh put in .carry-demo/npm (carry .carry-demo),
# or in $DEMO_PACKAGES. Steps: model.py's fixture test, corpus, tokenizer, training
# (TRAIN_SECONDS, default 330, bounds the training loop alone; the rest takes about 1-2 minutes),
# export, the transformers check and ninfer's reference.
#
# The work happens in $DEMO_WORK (default /tmp/ninfer-train-demo); OUT receives three files,
# because a device call returns at most 8 files of at most 16 MiB:
#   OUT/model.safetensors   the weights
#   OUT/demo-model.tar      every other file of the checkpoint folder (config, tokenizer, README,
#                           metrics.json, reference.json, reference.safetensors)
#   OUT/log.txt             everything printed
# Unpack into DEST:  mkdir -p DEST && tar -xf OUT/demo-model.tar -C DEST && cp OUT/model.safetensors DEST/
set -euo pipefail
out="${1:?usage: bash tools/train-demo/run_on_device.sh OUT [TRAIN_SECONDS]}"
budget="${2:-330}"
here=tools/train-demo
packages="${DEMO_PACKAGES:-.carry-demo/npm}"
work="${DEMO_WORK:-/tmp/ninfer-train-demo}"
ckpt="$work/demo-model"
mkdir -p "$out"
rm -rf "$work" && mkdir -p "$work"
exec > >(tee "$out/log.txt") 2>&1

step() { echo "== $(date -u +%T) [${SECONDS} s] $*"; }
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1

step "python3 $(python3 -c 'import sys, torch, transformers, tokenizers; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "cuda", torch.cuda.is_available())')"
step "model.py against the transformers fixtures"
python3 -m unittest "$here/tests/test_model.py"
step "corpus"
python3 "$here/prepare_corpus.py" --packages "$packages" --out "$work/corpus"
step "tokenizer"
python3 "$here/train_tokenizer.py" --corpus "$work/corpus" --out "$work/tokenizer" --vocab 8192
step "training for at most $budget s"
# $DEMO_TRAIN_ARGS: more train.py options (a CPU smoke test of this script: --preset tiny --seq 64).
python3 "$here/train.py" --corpus "$work/corpus" --tokenizer "$work/tokenizer" --out "$ckpt" --budget-s "$budget" \
  --command "bash $here/run_on_device.sh OUT $budget" ${DEMO_TRAIN_ARGS:-}
step "transformers check and ninfer's reference"
verified=1
python3 "$here/verify_transformers.py" --checkpoint "$ckpt" --corpus "$work/corpus" || verified=0

bytes=$(du -cb "$ckpt"/* | tail -1 | cut -f1)
ls -l "$ckpt"
cp "$ckpt/model.safetensors" "$out/"
tar -cf "$out/demo-model.tar" -C "$ckpt" --exclude model.safetensors .
step "done: the checkpoint folder is $bytes bytes"
if ((bytes > 20000000)); then
  echo "run_on_device: the checkpoint folder is over 20 MB" >&2
  exit 1
fi
if ((!verified)); then
  echo "run_on_device: the transformers check failed (log above; metrics.json has the details)" >&2
  exit 1
fi
