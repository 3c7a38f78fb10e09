# Sourced by the tests in this folder: their messages, prefixed with the
# test's name (TEST_NAME), and failure.
say() { echo "$TEST_NAME: $*"; }
fail() {
  echo "$TEST_NAME: FAIL: $*" >&2
  exit 1
}
