#!/usr/bin/env bash
# Runs inside the kernel-matrix guest, chrooted into the host's root (an
# overlay over the read-only 9p share): the test suite of the already-built
# tree, exactly as ./scripts/test.sh runs it on the host (ctest, so every test
# the build contains runs; then the ThreadSanitizer build's, if any). Writes the guest's kernel release, ctest's JUnit
# report and the exit status into the results share ($1).
set -uo pipefail
results=$1
# shellcheck source=/dev/null
. "$results/job.env"

export HOME=/tmp/kernel-matrix-home GOCACHE=/tmp/kernel-matrix-home/go-build TMPDIR=/tmp
mkdir -p "$HOME"
[ -n "$MATRIX_CI" ] && export CI=$MATRIX_CI

uptime_seconds() { cut -d' ' -f1 /proc/uptime; }
booted=$(uptime_seconds)
uname -r >"$results/uname"
echo "kernel-matrix: guest kernel $(uname -r) ($(nproc) CPUs)"
cd "$MATRIX_BUILD_DIR" || { echo "kernel-matrix: no build tree at $MATRIX_BUILD_DIR"; echo 1 >"$results/status"; exit 1; }
# Every test but the host_only ones: what does not depend on the kernel and
# is too slow under TCG (Packaging.install_remove_purge: cpack, lintian; the
# SDK's compile-and-link tests). -FS: the Node.js entry's fixture
# (SDK.perfmap_out_of_tree, a CMake build of perfmap against the installed
# SDK) is not rerun here: the entry loads the perfmap.so the host's run of the
# suite built in this same build tree (scripts/test.sh runs it first).
# shellcheck disable=SC2086  # MATRIX_CTEST_ARGS is a list of words
ctest --output-on-failure --timeout "$MATRIX_TEST_TIMEOUT" --output-junit "$results/ctest-junit.xml" -LE host_only \
  -FS perfmap_out_of_tree $MATRIX_CTEST_ARGS
status=$?
# The ThreadSanitizer build's tests (the host's threading), when test.sh
# made that build.
if [ -n "${MATRIX_TSAN_BUILD_DIR:-}" ] && [ -f "$MATRIX_TSAN_BUILD_DIR/CTestTestfile.cmake" ]; then
  # shellcheck disable=SC2086
  (cd "$MATRIX_TSAN_BUILD_DIR" && ctest -L tsan --output-on-failure --timeout "$MATRIX_TEST_TIMEOUT" \
     --output-junit "$results/ctest-tsan-junit.xml" $MATRIX_CTEST_ARGS) || status=1
fi
echo "boot ${booted}s, suite $(awk -v a="$booted" -v b="$(uptime_seconds)" 'BEGIN { printf "%.0f", b - a }')s by the guest's clock" >"$results/times"
echo "$status" >"$results/status"
exit "$status"
