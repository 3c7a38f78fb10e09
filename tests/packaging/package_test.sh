#!/usr/bin/env bash
# The Debian packages, installed for real (ctest Packaging.install_remove_purge,
# docs/packaging.md): builds them from the build tree (cpack -G DEB), runs
# lintian on each (no E: line), installs them all with dpkg -i, checks that
# the installed omniprof lists every plugin as loaded, removes omniprof-ruby
# and checks that ruby is then "not installed" (exit 0) while the others load
# and `omniprof record` still writes a profile, then purges everything and
# checks that no file of any package is left behind.
#
# It changes this machine (dpkg), so: root only (exit 77 = skipped
# otherwise), it refuses to run when an omniprof package or file is already
# there (it would remove or overwrite it), and it purges what it installed
# on every exit, failure included.
#
# Usage: package_test.sh BUILD_DIR WORKLOAD
#   WORKLOAD: a program burning CPU for argv[1] seconds in leaf() through
#   stage_a/b/c (tests/workloads/chain.c, built without frame pointers).
set -uo pipefail
build_dir=$1
workload=$2

TEST_NAME=package_test
# shellcheck source=tests/packaging/test_support.sh
. "$(dirname "$0")/test_support.sh"

[ "$(id -u)" -eq 0 ] || { say "SKIP: needs root (installs packages with dpkg)"; exit 77; }
for tool in cpack dpkg dpkg-deb lintian; do
  command -v "$tool" >/dev/null || fail "$tool is missing (run ./scripts/install-deps.sh)"
done

# Anything omniprof already on this machine, from a package or not: this
# test would purge or overwrite it.
already=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' 'omniprof*' 2>/dev/null | awk '$2 !~ /^un/ {print $1}')
[ -z "$already" ] || fail "omniprof packages are already installed here ($(echo $already)): refusing to replace or purge them"
for path in /usr/bin/omniprof /etc/omniprof /usr/lib/omniprof /usr/share/omniprof /usr/include/omniprof; do
  [ ! -e "$path" ] || fail "$path exists but belongs to no omniprof package: refusing to overwrite or remove it"
done

work=$(mktemp -d /tmp/omniprof-packages-XXXXXX) || fail "mktemp failed"
installed_packages=()
workload_pid=
cleanup() {
  local status=$?
  [ -n "$workload_pid" ] && kill "$workload_pid" 2>/dev/null
  # Every package this test may have installed, whatever state it reached.
  local present=()
  for p in "${installed_packages[@]}"; do
    if dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -qv '^un'; then present+=("$p"); fi
  done
  if [ ${#present[@]} -gt 0 ]; then
    say "cleanup: purging ${present[*]}"
    dpkg -P "${present[@]}" >/dev/null || echo "package_test: cleanup: dpkg -P ${present[*]} failed" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- Build -------------------------------------------------------------------
say "cpack -G DEB in $build_dir"
(cd "$build_dir" && cpack -G DEB -B "$work/cpack") >"$work/cpack.log" 2>&1 || {
  cat "$work/cpack.log"
  fail "cpack failed"
}
mapfile -t debs < <(find "$work/cpack" -maxdepth 1 -name '*.deb' | sort)
[ ${#debs[@]} -gt 0 ] || fail "cpack made no .deb"
declare -A deb_of=()
for deb in "${debs[@]}"; do
  deb_of[$(dpkg-deb -f "$deb" Package)]=$deb
done
say "packages: ${!deb_of[*]}"
plugins=(native python ruby)
[ -n "${deb_of[omniprof-perfmap]:-}" ] && plugins+=(perfmap) ||
  say "no omniprof-perfmap package (sdk/examples/perfmap is not in this tree): its checks are skipped"
for p in omniprof "${plugins[@]/#/omniprof-}"; do
  [ -n "${deb_of[$p]:-}" ] || fail "cpack made no $p package"
done
# Where the packages put the plugins (lib/omniprof/plugins under /usr, or
# the multiarch lib directory when the tree was configured with prefix /usr).
plugin_dir=$(dpkg -c "${deb_of[omniprof-native]}" | awk '{print $6}' | sed -n 's|^\.\(/.*\)/native\.so$|\1|p')
[ -n "$plugin_dir" ] || fail "omniprof-native holds no native.so"
say "plugin directory: $plugin_dir"
if [ -z "${deb_of[omniprof-dev]:-}" ]; then
  say "no omniprof-dev package: the SDK's install rules do not carry COMPONENT dev in this tree yet; its checks are skipped"
fi

# --- lintian -----------------------------------------------------------------
for deb in "${debs[@]}"; do
  lintian --tag-display-limit 0 "$deb" >"$work/lintian.txt" 2>&1
  sed "s|^|  |" "$work/lintian.txt"
  if grep -q '^E:' "$work/lintian.txt"; then fail "lintian reports errors in ${deb##*/}"; fi
  say "lintian: ${deb##*/}: no errors ($(grep -c '^W:' "$work/lintian.txt") warnings)"
done

# --- Install -----------------------------------------------------------------
installed_packages=("${!deb_of[@]}")
dpkg -i "${debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
say "installed ${#debs[@]} packages"
[ -f /etc/omniprof/conf.d/50-ruby.yaml ] || fail "/etc/omniprof/conf.d/50-ruby.yaml was not installed"
if [ -n "${deb_of[omniprof-dev]:-}" ]; then
  # The SDK where a third party's build looks for it.
  [ -f /usr/include/omniprof/plugin.h ] || fail "omniprof-dev did not install /usr/include/omniprof/plugin.h"
  compgen -G '/usr/lib*/cmake/omniprof-sdk/omniprof-sdkConfig.cmake' >/dev/null ||
    compgen -G '/usr/lib/*/cmake/omniprof-sdk/omniprof-sdkConfig.cmake' >/dev/null ||
    fail "omniprof-dev did not install the CMake package omniprof-sdk"
  say "omniprof-dev: plugin.h and the omniprof-sdk CMake package are installed"
fi

in_ci() { [ "${CI:-}" = true ]; }
# The installed binary with the installed /etc config: nothing from the
# environment may point it elsewhere.
installed_omniprof() { env -u OMNIPROF_CONFIG_DIR /usr/bin/omniprof "$@"; }

# Prints `omniprof plugins`; sets bpf_usable. Without BPF, plugins are only
# checked (state "checked"), which the e2e rule accepts outside CI only.
plugins_output=
list_plugins() {
  plugins_output=$(installed_omniprof plugins 2>&1)
  local status=$?
  echo "$plugins_output" | sed "s|^|  |"
  [ "$status" -eq 0 ] || fail "omniprof plugins exited $status"
  if echo "$plugins_output" | grep -q '^BPF objects not loaded'; then
    in_ci && fail "BPF unusable in CI: $(echo "$plugins_output" | grep '^BPF objects not loaded')"
    expected_state=checked
  else
    expected_state=loaded
  fi
}
expect_plugin() {  # runtime
  echo "$plugins_output" | grep -Eq "^$expected_state +[^ ]+ [^ ]+ \(runtime $1\)  $plugin_dir/$1\.so" ||
    fail "omniprof plugins does not list $1 as $expected_state from $plugin_dir"
}

list_plugins
for p in "${plugins[@]}"; do expect_plugin "$p"; done
say "every plugin is $expected_state"

# --- Remove omniprof-ruby ----------------------------------------------------
dpkg -r omniprof-ruby >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -r omniprof-ruby failed"; }
[ ! -e "$plugin_dir/ruby.so" ] || fail "ruby.so is still there after dpkg -r omniprof-ruby"
# Its drop-in is a conffile: kept until purge, and it still enables ruby.
[ -f /etc/omniprof/conf.d/50-ruby.yaml ] || fail "dpkg -r removed the conffile 50-ruby.yaml (only purge should)"
list_plugins
echo "$plugins_output" | grep -q '^not installed ruby.so (runtime ruby)$' ||
  fail "omniprof plugins does not report ruby as not installed"
echo "$plugins_output" | grep -q "reason: runtime 'ruby' is enabled in the config but no ruby.so is in $plugin_dir" ||
  fail "omniprof plugins gives no reason naming ruby.so and the plugin directory"
for p in "${plugins[@]}"; do [ "$p" = ruby ] || expect_plugin "$p"; done
say "after dpkg -r omniprof-ruby: ruby not installed, the others $expected_state, exit 0"

# The network transports are a module of the omniprof package, loaded only
# for export and /metrics: the binary links none of what it needs, and it
# finds everything it needs installed.
module=/usr/lib/omniprof/network.so
[ -f "$module" ] || fail "$module is not installed by the omniprof package"
ldd /usr/bin/omniprof | grep -Eq 'lib(grpc|cpp-httplib|ssl|crypto)' &&
  fail "/usr/bin/omniprof links gRPC, cpp-httplib or OpenSSL: $(ldd /usr/bin/omniprof | grep -E 'grpc|httplib|ssl|crypto')"
ldd "$module" | grep -q 'not found' && fail "$module needs libraries that are not installed: $(ldd "$module" | grep 'not found')"
say "the network module is installed, complete, and not linked by the binary"

if [ "$expected_state" = loaded ]; then
  "$workload" 60 &  # killed once recorded; long enough for a slow start
  workload_pid=$!
  installed_omniprof record -d 2 -p "$workload_pid" -o "$work/profile.pb.gz" >"$work/record.out" 2>"$work/record.err"
  status=$?
  kill "$workload_pid" 2>/dev/null
  wait "$workload_pid" 2>/dev/null
  workload_pid=
  sed "s|^|  |" "$work/record.err" "$work/record.out"
  [ "$status" -eq 0 ] || fail "omniprof record exited $status without omniprof-ruby"
  [ "$(grep -c 'ruby not installed' "$work/record.err")" -eq 1 ] ||
    fail "omniprof record did not say in one log line that ruby is not installed"
  samples=$(sed -n 's/^wrote .* (\([0-9]*\) samples)$/\1/p' "$work/record.out")
  [ -n "$samples" ] && [ "$samples" -gt 0 ] || fail "omniprof record wrote no samples"
  [ -s "$work/profile.pb.gz" ] || fail "omniprof record wrote no profile"
  # Named through the installed native plugin's unwind tables (the
  # workload has no frame pointers).
  grep -q ' stage_a$' "$work/record.out" || fail "the profile has no stage_a frame (native unwinding)"
  say "omniprof record without ruby: $samples samples, stage_a unwound"
else
  say "SKIP: omniprof record (BPF unusable here)"
fi

# --- Purge everything --------------------------------------------------------
dpkg -P "${installed_packages[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -P failed"; }
left=()
for deb in "${debs[@]}"; do
  while read -r path; do
    path=/${path#./}
    path=${path%/}
    # Directories every system has (/usr, /etc, /usr/share/doc) stay.
    if [ -d "$path" ] && [ ! -L "$path" ]; then continue; fi
    [ -e "$path" ] || [ -L "$path" ] && left+=("$path")
  done < <(dpkg -c "$deb" | awk '{print $6}')
done
for dir in /etc/omniprof /usr/lib/omniprof /usr/share/omniprof /usr/include/omniprof /usr/share/doc/omniprof /usr/share/doc/omniprof-* \
           /usr/lib/*/omniprof /usr/lib/cmake/omniprof* /usr/lib/*/cmake/omniprof* /usr/lib/pkgconfig/omniprof* \
           /usr/lib/*/pkgconfig/omniprof*; do
  [ -e "$dir" ] && left+=("$dir")
done
[ ${#left[@]} -eq 0 ] || fail "left behind after dpkg -P: ${left[*]}"
still=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' 'omniprof*' 2>/dev/null | awk '$2 !~ /^un/ {print $1}')
[ -z "$still" ] || fail "still known to dpkg after purge: $still"
installed_packages=()
say "purged: no file of the ${#debs[@]} packages is left"
say "PASS"
