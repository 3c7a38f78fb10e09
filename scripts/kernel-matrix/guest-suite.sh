#!/usr/bin/env bash
# Runs inside the kernel-matrix guest, chrooted into the host's root (an
# overlay over the read-only 9p share): the test suite of the already-built
# tree, with ctest as ./scripts/test.sh runs it on the host, less what does not
# depend on the kernel (see below). Writes the guest's kernel release, ctest's JUnit
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
# The export tests' backends listen on 127.0.0.1: the guest's loopback
# starts down.
ip link set lo up 2>/dev/null || busybox ip link set lo up || echo "kernel-matrix: cannot bring up lo"
cd "$MATRIX_BUILD_DIR" || { echo "kernel-matrix: no build tree at $MATRIX_BUILD_DIR"; echo 1 >"$results/status"; exit 1; }
# What depends on the kernel: every entry but the host_only ones (what
# does not depend on it and is slow under TCG: Packaging.install_remove_purge
# with cpack and lintian, the SDK's header and pkg-config compile-and-link
# tests, the systemd unit's verification; the SDK tests that load the docs'
# plugin's BPF run here) and the per-test unit entries (label unit): the guest runs
# each unit test binary as one entry instead (UnitSuite.*, label unit_suite;
# cmake/UnitTests.cmake says why). The ThreadSanitizer build's entry stays on
# the host: it tests the host's threading, not the kernel. -FS: the fixtures
# of the Node.js entry (SDK.perfmap_out_of_tree) and of SDK.hello_plugin_loads
# (SDK.installed_plugin), CMake builds against the installed SDK, are not
# rerun here: the entries load the perfmap.so and hello.so the host's run of
# the suite built in this same build tree (scripts/test.sh runs it first). MATRIX_CTEST_EXCLUDE: what this kernel's guest leaves out
# (scripts/kernel-matrix.sh says what and why). A gtest entry whose tests
# were skipped is reported skipped (status="notrun" in the JUnit report,
# cmake/run_gtest_entry.sh), which the host counts as a skip and, under
# CI=true, fails.
# shellcheck disable=SC2086  # MATRIX_CTEST_ARGS is a list of words
ctest --output-on-failure --timeout "$MATRIX_TEST_TIMEOUT" --output-junit "$results/ctest-junit.xml" \
  -LE 'host_only|^unit$' -FS 'perfmap_out_of_tree|sdk_hello_plugin' ${MATRIX_CTEST_EXCLUDE:+-E "$MATRIX_CTEST_EXCLUDE"} $MATRIX_CTEST_ARGS
status=$?
echo "boot ${booted}s, suite $(awk -v a="$booted" -v b="$(uptime_seconds)" 'BEGIN { printf "%.0f", b - a }')s by the guest's clock" >"$results/times"
echo "$status" >"$results/status"
exit "$status"
