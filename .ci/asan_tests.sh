#!/usr/bin/env bash
# The decoder tests (tests/test_decode_*.py, and the snapshot reader's tests/test_snapshot_reader.py) against an AddressSanitizer + UBSan build of the
# native decoder. The build goes into a temporary copy of the package, so the normal in-place
# build (tb_profiler/_native*.so) is left alone. Exits non-zero on any test failure and on any
# sanitizer report (in pytest or in the fuzz worker subprocesses).
#
#   .ci/asan_tests.sh [extra pytest args]        e.g. .ci/asan_tests.sh -x -k malformed
#   TB_PROFILER_FUZZ_SECONDS=60 .ci/asan_tests.sh
#   KEEP_ASAN_BUILD=1 .ci/asan_tests.sh           keep the temp copy (path printed)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python}"
CC_BIN="${CC:-gcc}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tb_profiler_asan.XXXXXX")"
if [ "${KEEP_ASAN_BUILD:-0}" = "1" ]; then
  echo "asan: build kept in $WORK"
else
  trap 'rm -rf "$WORK"' EXIT
fi
start=$(date +%s)

# 1. a copy of the package and the C sources, built with the sanitizers (sets SO, LIBASAN,
#    LIBUBSAN; exits 2 on failure)
source "$ROOT/.ci/asan_build.sh"

# torch's sample traces (tests/conftest.py: sample_traces) are written here, without the
# sanitizers: only the decoder is under test, and torch under ASan is slow and noisy
if [ -z "${TB_PROFILER_SAMPLE_LOGDIR:-}" ] && [ -f "$ROOT/samples/make_all.py" ] \
    && "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  if (cd "$ROOT" && "$PYTHON" samples/make_all.py "$WORK/sample_logdir" >"$WORK/samples.log" 2>&1); then
    export TB_PROFILER_SAMPLE_LOGDIR="$WORK/sample_logdir"
  else
    echo "asan: samples/make_all.py failed (the sample traces test will retry):"; tail -20 "$WORK/samples.log"
  fi
fi

LOGS="$WORK/sanitizer-logs"
mkdir -p "$LOGS"

# 2. the tests, importing tb_profiler from the copy (cwd is the copy: `python -m` puts the cwd
#    first on sys.path, so the repo's own build cannot shadow it)
export LD_PRELOAD="$LIBASAN:$LIBUBSAN"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86:log_path=$LOGS/asan:log_exe_name=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$LOGS/ubsan"
export PYTHONPATH="$WORK:$ROOT/tests"
export PYTHONDONTWRITEBYTECODE=1
export TB_PROFILER_DECODE_TESTS_SANITIZED=1             # big real traces: reference only if cached
export TB_PROFILER_TRUNCATION_CUTS="${TB_PROFILER_TRUNCATION_CUTS:-60}"
cd "$WORK"
"$PYTHON" - "$WORK" <<'EOF'
import sys
import tb_profiler._native as n
assert n.__file__.startswith(sys.argv[1]), f"imported {n.__file__}, not the ASan build"
print(f"asan: testing {n.__file__}")
EOF

status=0
"$PYTHON" -m pytest -q -p no:randomly \
  "$ROOT/tests/test_decode_differential.py" \
  "$ROOT/tests/test_decode_malformed.py" \
  "$ROOT/tests/test_decode_fuzz.py" \
  "$ROOT/tests/test_decode_parallel.py" \
  "$ROOT/tests/test_decode_keep_input.py" \
  "$ROOT/tests/test_snapshot_reader.py" \
  "$@" || status=$?
pytest_status=$status

unset LD_PRELOAD
reports=$(find "$LOGS" -type f | wc -l)
if [ "$reports" -gt 0 ]; then
  echo "asan: $reports sanitizer report(s):"
  for f in "$LOGS"/*; do echo "==== $f"; head -c 20000 "$f"; done
  [ "$status" -eq 0 ] && status=1
fi
echo "asan: pytest exit status $pytest_status, $reports sanitizer report(s), $(( $(date +%s) - start )) s"
exit "$status"
