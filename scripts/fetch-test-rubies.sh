#!/usr/bin/env bash
# Unpacks a second CRuby build, Debian 13 (trixie)'s ruby 3.3, into
# /opt/omniprof/test-rubies/ruby-3.3 (or $OMNIPROF_TEST_RUBIES/ruby-3.3),
# with the trixie C library it needs, for the ruby plugin's unit tests
# (tests/unit/ruby/ruby_other_builds_test.cpp): they run it through its own
# dynamic loader and check the shipped 3.3 offsets on its live frames. The
# packages come from Debian's archive, signed as apt checks them; nothing is
# installed into the system. Idempotent.
set -euo pipefail

root="${OMNIPROF_TEST_RUBIES:-/opt/omniprof/test-rubies}/ruby-3.3"
if [ -x "$root/usr/bin/ruby3.3" ]; then
  echo "fetch-test-rubies: $root present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "fetch-test-rubies: must run as root to write $root (try: sudo $0)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$work/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
             -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Architecture=amd64" -o "APT::Sandbox::User=root")
apt-get "${apt_options[@]}" update -qq
# ruby3.3 and libruby3.3, and what they load at run time (their Depends on
# shared libraries); ruby's own library directory comes with libruby3.3.
packages=(ruby3.3 libruby3.3 libc6 libgcc-s1 libcrypt1 libffi8 libgmp10 libyaml-0-2 zlib1g)
(cd "$work/debs" && apt-get "${apt_options[@]}" download -qq "${packages[@]}")
rm -rf "$root.partial"
mkdir -p "$root.partial"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$root.partial"
done
rm -rf "$root"
mv "$root.partial" "$root"
echo "fetch-test-rubies: unpacked ${packages[*]} (trixie) into $root"
