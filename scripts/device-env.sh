# Sourced by the scripts/device-run-*.sh scripts on the device machine: where the carried bundle
# (scripts/device-bundle.sh) is unpacked, the environment its programs and tests need, and a
# section header for the logs.
n=/tmp/ninfer-carry
export LD_LIBRARY_PATH="$n/ninfer/lib" NINFER_TEST_FIXTURES="$PWD/tests/fixtures" NINFER_SOURCE_DIR="$n"
# unpack_bundle [DEFAULT_CARRY]: $CARRY's bundle (else DEFAULT_CARRY's, else .carry's) into $n.
unpack_bundle() { rm -rf "$n" && mkdir -p "$n" && tar -C "$n" -xzf "${CARRY:-${1:-.carry}}/bundle.tar.gz"; }
step() { echo; echo "=== $*"; }
