#!/bin/sh
# Compiler launcher for CUDA kernel objects: runs the compile (with -Xptxas -v added by the
# target) and keeps ptxas's resource report in OBJECT.ptxas.log, which
# cmake/GenKernelResources.cmake turns into the plugin's build-time resource table. The
# report is kept out of the console; any other compiler output still shows. ccache replays
# stderr on a hit, so the log is rewritten on cached builds too.
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  prev="$a"
done
[ -n "$out" ] || exec "$@"
"$@" 2>"$out.ptxas.tmp"
rc=$?
grep -v -e '^ptxas info' -e 'bytes stack frame' "$out.ptxas.tmp" >&2
mv "$out.ptxas.tmp" "$out.ptxas.log"
exit $rc
