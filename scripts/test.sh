#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: unit tests and the
# end-to-end tests that load real BPF and profile real processes (as root).
# With CI=true, a test that needs BPF fails if BPF is unusable.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
echo "test: running kernel $(uname -r)"
cd "${OMNIPROF_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 300
