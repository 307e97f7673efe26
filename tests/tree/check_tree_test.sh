#!/usr/bin/env bash
# scripts/check-tree.sh on planted files: a file that narrates history by ordinal markers and a
# __pycache__ path must each fail it, naming FILE:LINE; plain prose that uses the same words in
# their ordinary sense must pass.
#   bash tests/tree/check_tree_test.sh PATH/TO/check-tree.sh
set -uo pipefail
check="${1:?usage: check_tree_test.sh PATH/TO/check-tree.sh}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# expect STATUS FILE [LINE...]: check-tree.sh on FILE exits STATUS and reports exactly these lines.
expect() {
  local want_status="$1" file="$2"; shift 2
  local out status
  out="$(bash "$check" "$file" 2>/dev/null)"; status=$?
  [[ "$status" == "$want_status" ]] || fail "$file: exit $status, expected $want_status; output: $out"
  local want got
  want="$(for l in "$@"; do echo "$file:$l:"; done)"
  got="$(grep -oE "^$file:[0-9]+:" <<< "$out")"
  [[ "$got" == "$want" ]] || fail "$file: reported [${got//$'\n'/ }], expected [${want//$'\n'/ }]"
}

# Ordinary prose: must pass.
cat > "$dir/prose.cu" <<'TXT'
// The second pass over the keys adds the chunks' rows; two rounds of loads are in flight.
// A first pass finds the maximum. An HTTP session ends when the client disconnects.
// Round 2 of the merge is the last one; "round" and "session" alone say nothing of history.
TXT
expect 0 "$dir/prose.cu"

# The planted markers are assembled here, so this file itself narrates nothing ($s, $r, $p).
s=session r=round p=pass

# Narration: lines 2, 3, 5 (a marker split over two comment lines) and 7.
cat > "$dir/narrating.cpp" <<TXT
// Each warp owns its rows.
// Measured in the ninth $s: 46 us per layer.
// (docs/performance.md "Eighteenth $s")
// Nothing here.
// The merge moved (docs/performance.md "Eleventh
// $s"), fewer round trips.
# this $s's build was faster
TXT
expect 1 "$dir/narrating.cpp" 2 3 5 7

# More markers, one per line.
cat > "$dir/markers.md" <<TXT
${s^} 12 measured it.
Fixed in $r 3.
Since the third ${p}, prompts take cuBLASLt.
The 19th $s's bench.
TXT
expect 1 "$dir/markers.md" 1 2 3 4

# A Python cache path fails whatever it holds.
mkdir -p "$dir/tool/__pycache__"
echo "plain" > "$dir/tool/__pycache__/mod.cpython-311.pyc"
expect 1 "$dir/tool/__pycache__/mod.cpython-311.pyc" 1
echo "plain" > "$dir/loose.pyc"
expect 1 "$dir/loose.pyc" 1

# Several files at once: each finding keeps its own file name.
out="$(bash "$check" "$dir/prose.cu" "$dir/narrating.cpp" 2>/dev/null)"; status=$?
[[ $status == 1 && "$out" == *"$dir/narrating.cpp:2:"* && "$out" != *"$dir/prose.cu:"* ]] ||
  fail "two files: exit $status, output: $out"

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "check-tree.sh: narration and caches fail with FILE:LINE, plain prose passes"
