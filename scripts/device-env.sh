# Sourced by the scripts/device-run-*.sh scripts on the device machine: where the carried bundle
# (scripts/device-bundle.sh) is unpacked, the environment its programs and tests need, and a
# section header for the logs.
n=/tmp/ninfer-carry
export LD_LIBRARY_PATH="$n/ninfer/lib" NINFER_TEST_FIXTURES="$PWD/tests/fixtures" NINFER_SOURCE_DIR="$n"
# unpack_bundle [DEFAULT_CARRY]: $CARRY's bundle (else DEFAULT_CARRY's, else .carry's) into $n.
unpack_bundle() {
  local bundle="${CARRY:-${1:-.carry}}/bundle.tar.gz"
  rm -rf "$n" && mkdir -p "$n" && tar -C "$n" -xzf "$bundle" && md5sum < "$bundle" > "$n/.bundle.md5"
}
# ensure_bundle [DEFAULT_CARRY]: unpack unless $n already holds this very bundle. A device machine
# can stay warm between calls, and an unpacked copy from an earlier call (another build) must not
# be measured in place of the one carried now.
ensure_bundle() {
  local bundle="${CARRY:-${1:-.carry}}/bundle.tar.gz"
  [[ -d "$n/ninfer" && "$(md5sum < "$bundle")" == "$(cat "$n/.bundle.md5" 2>/dev/null)" ]] || unpack_bundle "$@"
}
step() { echo; echo "=== $*"; }
