#!/usr/bin/env bash
# Runs a googletest binary as ONE ctest entry (omniprof_add_gtest_entry,
# cmake/UnitTests.cmake) and turns what it ran into ctest's verdict, which
# gtest's exit status alone does not give: it exits 0 when every test it ran
# was skipped, and 0 when its --gtest_filter matched no test at all.
#
#   run_gtest_entry.sh COMMAND [ARGS...]
#
# COMMAND ARGS is the test binary and its arguments (or a command that ends
# by running it, such as setarch ... BINARY); --gtest_output=json:REPORT is
# appended. Exit status:
#   the binary's own, when it is not 0 (a test failed or it crashed);
#   1 when it exited 0 but ran no test (a filter that matches nothing, or no
#     report written): an entry that tests nothing must not pass;
#   77 (the entry's SKIP_RETURN_CODE: ctest shows it as skipped, its JUnit
#     report as status="notrun") when no test failed but one or more were
#     skipped: a skip is never counted as a pass;
#   0 when every test it ran passed.
# A binary that itself exits 77 would read as a skip: that is made 1.
set -uo pipefail

if [ $# -eq 0 ]; then
  echo "run_gtest_entry: no command given" >&2
  exit 2
fi

report=$(mktemp "${TMPDIR:-/tmp}/gtest-entry-XXXXXX.json") || {
  echo "run_gtest_entry: cannot create a report file in ${TMPDIR:-/tmp}" >&2
  exit 2
}
trap 'rm -f "$report"' EXIT
# gtest writes the report after the last test; an empty file means none.
: >"$report"

"$@" "--gtest_output=json:$report"
status=$?
if [ "$status" -eq 77 ]; then
  echo "run_gtest_entry: $1 exited 77 itself (not a skip this script decided): reported as a failure" >&2
  exit 1
fi
[ "$status" -eq 0 ] || exit "$status"

# gtest's JSON report is pretty-printed with two spaces per level: the
# top-level "tests" (the tests the filter selected) is the first line with
# exactly two; each skipped test has its own "result": "SKIPPED" line.
ran=$(grep -m 1 -E '^  "tests": [0-9]+,$' "$report" | grep -o -E '[0-9]+')
if [ -z "$ran" ]; then
  echo "run_gtest_entry: $1 exited 0 but wrote no test report (--gtest_output=json): failed" >&2
  exit 1
fi
if [ "$ran" -eq 0 ]; then
  echo "run_gtest_entry: no test matched in '$*': an entry that runs no test fails" >&2
  exit 1
fi
skipped=$(grep -c -E '^ +"result": "SKIPPED",?$' "$report")
if [ "$skipped" -gt 0 ]; then
  echo "run_gtest_entry: $skipped of $ran tests skipped, none failed: the entry is reported as skipped"
  exit 77
fi
exit 0
