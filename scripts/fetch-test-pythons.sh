#!/usr/bin/env bash
# Unpacks Debian's own CPython builds for the python plugin's tests, beside
# pyenv's: sid's python3.14 and python3.15 and Debian 13 (trixie)'s
# python3.13, each with its standard library, its shared libpython, its
# headers (libpython3.X-dev) and the C library and shared libraries it loads,
# under /opt/omniprof/test-pythons/NAME/ (or $OMNIPROF_TEST_PYTHONS/NAME/),
# and a launcher per interpreter, /opt/omniprof/test-pythons/bin/NAME, that
# runs it through its own dynamic loader with its own libraries: a test (or a
# person) starts it like any python. Debian ships no executable linked to its
# libpython (python3.X is static; libpython3.X.so is for embedding), so there
# is one launcher per interpreter:
#   python3.14            sid's 3.14
#   python3.15            sid's 3.15
#   python3.13-debian13   trixie's 3.13
# The packages come from Debian's archive, signed as apt checks them (the
# lists are fetched into a temporary directory; the system's apt state is not
# touched); nothing is installed into the system. Idempotent: an interpreter
# whose launcher runs is left as it is.
#
# Usage: scripts/fetch-test-pythons.sh [NAME]...   (default: all three)
set -euo pipefail

top="${OMNIPROF_TEST_PYTHONS:-/opt/omniprof/test-pythons}"

# NAME SUITE MINOR: which Debian suite each interpreter comes from.
interpreters=(
  "python3.14 sid 3.14"
  "python3.15 sid 3.15"
  "python3.13-debian13 trixie 3.13"
)

log() { echo "fetch-test-pythons: $*"; }
die() { echo "fetch-test-pythons: $*" >&2; exit 1; }

# The shared libraries python3.X and its standard library's extension
# modules load (the packages' Depends on libraries; data packages such as
# tzdata and media-types left out: nothing the tests import reads them).
runtime_libraries=(libc6 libgcc-s1 libexpat1 zlib1g libssl3t64 libzstd1 libffi8 libbz2-1.0 liblzma5 libuuid1
                   libsqlite3-0 libncursesw6 libtinfo6 libreadline8t64 libcrypt1 libmpdec4)

launcher_works() {
  local launcher=$1 minor=$2
  [ -x "$launcher" ] && [ "$("$launcher" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$minor" ]
}

# Fetches the suite's package lists once per run into $work/SUITE.
apt_options_for() {
  local suite=$1 dir=$work/$1
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
      >"$dir/sources.list"
  fi
  apt_options=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
               -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o "APT::Architecture=amd64"
               -o "APT::Sandbox::User=root")
  if [ ! -e "$dir/updated" ]; then
    apt-get "${apt_options[@]}" update -qq || die "apt-get update of $suite failed"
    touch "$dir/updated"
  fi
}

fetch_one() {
  local name=$1 suite=$2 minor=$3
  local root=$top/$name launcher=$top/bin/$name
  if launcher_works "$launcher" "$minor"; then
    log "$name present ($launcher)"
    return 0
  fi
  apt_options_for "$suite"
  local debs=$work/debs-$name packages=()
  packages=("python$minor" "python$minor-minimal" "libpython$minor" "libpython$minor-minimal"
            "libpython$minor-stdlib" "libpython$minor-dev")
  # A library the suite does not have under that name (a transition) is
  # left out; python's own packages must all be there.
  local library
  for library in "${runtime_libraries[@]}"; do
    if apt-cache "${apt_options[@]}" show "$library" >/dev/null 2>&1; then
      packages+=("$library")
    fi
  done
  rm -rf "$debs"
  mkdir -p "$debs"
  (cd "$debs" && apt-get "${apt_options[@]}" download -qq "${packages[@]}") ||
    die "cannot download ${packages[*]} from $suite"
  rm -rf "$root.partial"
  mkdir -p "$root.partial"
  local deb
  for deb in "$debs"/*.deb; do
    dpkg-deb -x "$deb" "$root.partial"
  done
  local loader=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
  [ -e "$root.partial/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" ] ||
    die "$suite's libc6 has no usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
  [ -x "$root.partial/usr/bin/python$minor" ] || die "python$minor ($suite) has no usr/bin/python$minor"
  rm -rf "$root"
  mv "$root.partial" "$root"
  mkdir -p "$top/bin"
  # ld.so runs the program with argv[0] its path: CPython finds its prefix
  # (ROOT/usr) and standard library from there. The library path is the
  # unpacked tree's only, so nothing of the host's C library is mixed in.
  cat >"$launcher.partial" <<EOF
#!/bin/sh
# $name: Debian $suite's python$minor, unpacked by scripts/fetch-test-pythons.sh.
exec "$loader" --library-path "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/python$minor" "\$@"
EOF
  chmod 0755 "$launcher.partial"
  mv "$launcher.partial" "$launcher"
  launcher_works "$launcher" "$minor" || die "$launcher does not run python $minor: $("$launcher" -c pass 2>&1 | head -3)"
  log "unpacked ${packages[*]} ($suite) into $root; launcher $launcher"
}

wanted=("$@")
work=
for entry in "${interpreters[@]}"; do
  read -r name suite minor <<<"$entry"
  if [ "${#wanted[@]}" -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then
    continue
  fi
  if launcher_works "$top/bin/$name" "$minor"; then
    log "$name present ($top/bin/$name)"
    continue
  fi
  if [ "$(id -u)" -ne 0 ]; then
    die "must run as root to write $top (try: sudo $0)"
  fi
  if [ -z "$work" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
  fi
  fetch_one "$name" "$suite" "$minor"
done
