#!/usr/bin/env bash
# Builds an AddressSanitizer + UBSan copy of the package (tb_profiler/ with tb_profiler._native
# compiled from native/ with -fsanitize=address,undefined) into a folder, leaving the normal
# in-place build (tb_profiler/_native*.so) alone. Used by .ci/asan_tests.sh (sourced) and by
# benchmarks/fuzz_long.py (run).
#
#   .ci/asan_build.sh DIR        build into DIR (created if missing); the last line printed is
#                                ASAN_PRELOAD=<libasan.so>:<libubsan.so>, for LD_PRELOAD
#   source .ci/asan_build.sh     with ROOT, PYTHON, CC_BIN and WORK set: build into $WORK and
#                                set SO, LIBASAN and LIBUBSAN
# Exits 2 when the build fails or the extension is not linked against libasan.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced
  set -euo pipefail
  if [ $# -ne 1 ]; then echo "usage: $0 DIR" >&2; exit 2; fi
  ROOT="$(cd "$(dirname "$0")/.." && pwd)"
  PYTHON="${PYTHON:-python}"
  CC_BIN="${CC:-gcc}"
  mkdir -p "$1"
  WORK="$(cd "$1" && pwd)"
  _asan_build_run=1
fi

# a copy of the package and the C sources, built with the sanitizers
cp -r "$ROOT/tb_profiler" "$ROOT/native" "$ROOT/setup.py" "$WORK/"
for f in pyproject.toml README.md; do
  if [ -f "$ROOT/$f" ]; then cp "$ROOT/$f" "$WORK/"; fi
done
find "$WORK/tb_profiler" \( -name '*.so' -o -name '*.pyd' -o -name '__pycache__' \) -prune -exec rm -rf {} +
echo "asan: building tb_profiler._native with -fsanitize=address,undefined in $WORK"
(cd "$WORK" && TB_PROFILER_ASAN=1 CC="$CC_BIN" "$PYTHON" setup.py -q build_ext --inplace >"$WORK/build.log" 2>&1) || {
  cat "$WORK/build.log"; echo "asan: build failed"; exit 2; }
SO="$(ls "$WORK"/tb_profiler/_native*.so)"
# ldd's output is read whole before grep looks at it: `ldd | grep -q` under pipefail fails
# at random when grep exits at the first match and ldd dies of SIGPIPE
DEPS="$(ldd "$SO")"
if ! grep -q libasan <<<"$DEPS"; then
  echo "asan: $SO is not linked against libasan:"; echo "$DEPS"; tail -20 "$WORK/build.log"; exit 2
fi

LIBASAN="$("$CC_BIN" -print-file-name=libasan.so)"
LIBUBSAN="$("$CC_BIN" -print-file-name=libubsan.so)"
for lib in "$LIBASAN" "$LIBUBSAN"; do
  if [ ! -e "$lib" ]; then echo "asan: $lib not found"; exit 2; fi
done

if [ "${_asan_build_run:-0}" = "1" ]; then
  echo "ASAN_PRELOAD=$LIBASAN:$LIBUBSAN"
fi
