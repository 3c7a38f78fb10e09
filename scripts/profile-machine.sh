#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, profile the
# whole machine for 10 seconds, write profile.pb.gz and print the 20 hottest
# functions. Extra arguments go to `omniprof record`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec "${OMNIPROF_BUILD_DIR:-build}/bin/omniprof" record -d 10 -o profile.pb.gz --top 20 "$@"
