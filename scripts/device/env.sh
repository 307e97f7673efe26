# Sourced by scripts/device.sh on the device machine: where the carried bundle (`scripts/device.sh
# bundle`) is unpacked, the environment its programs and tests need, and a section header for
# the logs.
n=/tmp/ninfer-carry
export LD_LIBRARY_PATH="$n/ninfer/lib" NINFER_TEST_FIXTURES="$PWD/tests/fixtures" NINFER_SOURCE_DIR="$n"
# unpack_bundle [DEFAULT_CARRY]: $CARRY's bundle (else DEFAULT_CARRY's, else .carry's) into $n.
unpack_bundle() {
  local bundle="${CARRY:-${1:-.carry}}/bundle.tar.gz"
  rm -rf "$n" && mkdir -p "$n" && tar -C "$n" -xzf "$bundle" && md5sum < "$bundle" > "$n/.bundle.md5" &&
    # Tests read the demo checkpoint and held-out text from the source tree, which is $n.
    mkdir -p "$n/tests/models" && ln -sfn "$PWD/models" "$n/models" && ln -sfn "$PWD/tests/models/data" "$n/tests/models/data"
}
# ensure_bundle [DEFAULT_CARRY]: unpack unless $n already holds this very bundle. A device machine
# can stay warm between calls, and an unpacked copy from an earlier call (another build) must not
# be measured in place of the one carried now.
ensure_bundle() {
  local bundle="${CARRY:-${1:-.carry}}/bundle.tar.gz"
  [[ -d "$n/ninfer" && "$(md5sum < "$bundle")" == "$(cat "$n/.bundle.md5" 2>/dev/null)" ]] || unpack_bundle "$@"
  use_plugins
}
# use_plugins: the plugins and schedule tables kept by `scripts/device.sh keep-plugins` in the
# folder $PLUGINS_FROM in place of the bundle's same-named ones, or the bundle's own where it is
# unset; the unpacked copy remembers which are in place, so one call can alternate them (an A/B
# of a plugin change).
use_plugins() {
  local lib="$n/ninfer/lib/ninfer/plugins" tables="$n/ninfer/share/ninfer/arch/schedules" want="${PLUGINS_FROM:-}" f
  local own="$n/.bundle-plugins"
  [[ "$(cat "$n/.plugins-from" 2>/dev/null)" == "$want" ]] && return
  [[ -d "$own" ]] || { mkdir -p "$own" && cp -r "$lib" "$own/plugins" && cp -r "$tables" "$own/schedules"; }
  rm -rf "$lib" "$tables" && cp -r "$own/plugins" "$lib" && cp -r "$own/schedules" "$tables"
  if [[ -n "$want" ]]; then
    compgen -G "$want/*.so.xz" > /dev/null ||
      { echo "PLUGINS_FROM=$want: no kept plugins there (keep-plugins)" >&2; return 1; }
    for f in "$want"/*.so.xz; do xz -dc "$f" > "$lib/$(basename "${f%.xz}")"; done
    for f in "$want"/*.yaml; do [[ -f "$f" ]] && cp "$f" "$tables/"; done
    echo "plugins and tables from $want: $(cd "$want" && ls | tr '\n' ' ')"
  fi
  echo "$want" > "$n/.plugins-from"
}
step() { echo; echo "=== $*"; }

# The unpacked install's sm_90 schedule table. table_routes_first OP@T[/LO-HI...]=VARIANT...: the
# built-in table with `{op: OP, tokens: [T, T], variant: VARIANT}` entries put first (the first
# entry that covers a call wins); T may be a range LO-HI (tokens: [LO, HI]); each /LO-HI adds a
# dims range, in order (dims: [[LO, HI], ...]); table_restore: the built-in table again.
sm90_table="$n/ninfer/share/ninfer/arch/schedules/sm_90.yaml"
table_routes_first() {
  [[ -f "$sm90_table.orig" ]] || cp "$sm90_table" "$sm90_table.orig"
  cp "$sm90_table.orig" "$sm90_table"
  local e op t v dims r x
  for e in "$@"; do
    [[ -n "$e" ]] || continue
    op="${e%%@*}" t="${e#*@}" v="${e#*=}"
    t="${t%%=*}" dims=""
    IFS=/ read -ra r <<< "$t"
    t="${r[0]}"
    for x in "${r[@]:1}"; do dims+="${dims:+, }[${x%-*}, ${x#*-}]"; done
    sed -i "/^entries:/a\\  - {op: $op, tokens: [${t%-*}, ${t#*-}],${dims:+ dims: [$dims],} variant: $v}" "$sm90_table"
  done
}
table_restore() { [[ ! -f "$sm90_table.orig" ]] || cp "$sm90_table.orig" "$sm90_table"; }

# ncu_decode_kernels PRESET REGEX: ncu's per-kernel times of two eager decode steps (batch 1,
# context 0, serialised, caches warm), the rows whose kernel matches REGEX and the total.
ncu_decode_kernels() {
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv "$n/ninfer/bin/ninfer-bench" \
    --preset "$1" --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 --repeats 1 --decode-steps 2 \
    --no-cuda-graph > /tmp/ncu-decode.csv 2>/dev/null
  python3 "$(dirname "${BASH_SOURCE[0]}")/ncu-summary.py" --steps 2 /tmp/ncu-decode.csv | grep -E "$2|total"
}
