#!/usr/bin/env bash
# The kernel matrix: boots Debian's newest 6.1 kernels (generic and PREEMPT_RT,
# from the Debian archive with `apt-get download`) in QEMU and runs the test
# suite of the already-built tree inside each, against this machine's root
# filesystem shared read-only over virtio 9p. Prints each guest's `uname -r`,
# each test's result and a summary; exits non-zero if a guest does not boot,
# runs out of time, or a test fails. docs/kernel-matrix.md tells more.
#
# Usage: scripts/kernel-matrix.sh [FLAVOUR|PACKAGE]... [-- CTEST_ARGS...]
#   FLAVOUR is amd64 or rt-amd64 (default: both), PACKAGE a linux-image-6.1.0-*
#   package name; CTEST_ARGS go to ctest in the guest (e.g. -R Record).
# Environment:
#   OMNIPROF_BUILD_DIR                build tree to test (default: build)
#   OMNIPROF_KERNEL_MATRIX_CACHE      downloaded and unpacked kernels
#                                     (default: /var/cache/omniprof/kernel-matrix)
#   OMNIPROF_KERNEL_MATRIX_TIMEOUT    seconds per guest, boot to power-off (default: 2400)
#   OMNIPROF_KERNEL_MATRIX_TEST_TIMEOUT  seconds per test in the guest (default: 600)
#   OMNIPROF_KERNEL_MATRIX_CPUS / _MEMORY  guest CPUs (default: nproc) / MiB (default: 4096)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO_DIR=$(pwd -P)
MATRIX_DIR=$REPO_DIR/scripts/kernel-matrix
BUILD_DIR=$(cd "${OMNIPROF_BUILD_DIR:-build}" 2>/dev/null && pwd -P) || {
  echo "kernel-matrix: no build tree at ${OMNIPROF_BUILD_DIR:-build} (run ./scripts/build.sh first)" >&2
  exit 2
}
CACHE_DIR=${OMNIPROF_KERNEL_MATRIX_CACHE:-/var/cache/omniprof/kernel-matrix}
GUEST_TIMEOUT=${OMNIPROF_KERNEL_MATRIX_TIMEOUT:-2400}
TEST_TIMEOUT=${OMNIPROF_KERNEL_MATRIX_TEST_TIMEOUT:-600}
GUEST_CPUS=${OMNIPROF_KERNEL_MATRIX_CPUS:-$(nproc)}
GUEST_MEMORY=${OMNIPROF_KERNEL_MATRIX_MEMORY:-4096}
# The 9p and overlay filesystems; their dependencies come from each module's
# own .modinfo, so the chain follows whatever the kernel package ships.
ROOT_MODULES=(virtio_pci 9pnet_virtio 9p overlay)

log() { echo "kernel-matrix: $*"; }
die() {
  echo "kernel-matrix: $*" >&2
  exit 2
}

kernels=()
ctest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; ctest_args=("$@"); break ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) kernels+=("$1"); shift ;;
  esac
done
[ ${#kernels[@]} -gt 0 ] || kernels=(amd64 rt-amd64)

for tool in qemu-system-x86_64 busybox cpio gzip objcopy readelf apt-get apt-cache dpkg timeout xz zstd; do
  command -v "$tool" >/dev/null || die "$tool is missing (run ./scripts/install-deps.sh)"
done
BUSYBOX=$(command -v busybox)
! readelf -l "$BUSYBOX" | grep -q 'program interpreter' ||
  die "$BUSYBOX is not static: the initramfs needs busybox-static"
[ -x "$BUILD_DIR/bin/omniprof" ] || die "$BUILD_DIR/bin/omniprof is missing (run ./scripts/build.sh first)"
mkdir -p "$CACHE_DIR"

# Newest linux-image-6.1.0-N-FLAVOUR package: unsigned if the archive has it,
# else signed (the same kernel and modules). Prints nothing if there is none.
newest_package() {
  local flavour=$1 suffix name
  for suffix in -unsigned ""; do
    name=$(apt-cache search --names-only "^linux-image-6\.1\.0-[0-9]+-${flavour}${suffix}\$" 2>/dev/null |
      awk '{print $1}' | sort -V | tail -n 1)
    if [ -n "$name" ]; then
      echo "$name"
      return
    fi
  done
}

resolve_package() {
  local wanted=$1 name
  case $wanted in
    linux-image-*) echo "$wanted"; return ;;
  esac
  name=$(newest_package "$wanted")
  if [ -z "$name" ]; then
    # A fresh machine may not have read the package lists yet.
    log "no linux-image-6.1.0-*-$wanted in apt's lists: apt-get update" >&2
    apt-get update -qq >&2 || true
    name=$(newest_package "$wanted")
  fi
  [ -n "$name" ] || die "no linux-image-6.1.0-*-$wanted package in the Debian archive"
  echo "$name"
}

# amd64 or rt-amd64 for linux-image-6.1.0-N-amd64[-unsigned] and the like.
flavour_of() {
  local flavour=${1#linux-image-6.1.0-*-}
  echo "${flavour%-unsigned}"
}

# Removes the cached packages and trees of the same flavour as PACKAGE but of
# another ABI or version (about 470 MB each): a new kernel replaces the old.
prune_older() {
  local package=$1 version=$2 entry name
  for entry in "$CACHE_DIR"/linux-image-6.1.0-*; do
    [ -e "$entry" ] || continue
    name=${entry##*/}
    name=${name%%_*}
    [ "$(flavour_of "$name")" = "$(flavour_of "$package")" ] || continue
    case ${entry##*/} in
      "${package}_${version}" | "${package}_${version//:/%3a}_amd64.deb") ;;
      *) log "removing the superseded $entry" >&2; rm -rf "$entry" ;;
    esac
  done
}

# Downloads (once) and unpacks (once) a kernel package; prints its unpacked root.
fetch_kernel() {
  local package=$1 version deb root
  version=$(apt-cache show --no-all-versions "$package" 2>/dev/null | sed -n 's/^Version: //p' | head -n 1)
  [ -n "$version" ] || die "apt knows no version of $package"
  deb=$CACHE_DIR/${package}_${version//:/%3a}_amd64.deb
  if [ ! -s "$deb" ]; then
    log "downloading $package $version into $CACHE_DIR" >&2
    # apt-get download names the file itself; _apt cannot write to a root-owned
    # cache, which makes apt warn and download as root: that is fine here.
    (cd "$CACHE_DIR" && apt-get download -q "$package=$version" 2>&1 | grep -v 'unsandboxed' >&2) || true
    [ -s "$deb" ] || die "apt-get download $package=$version did not produce $deb"
    prune_older "$package" "$version"
  fi
  root=$CACHE_DIR/${package}_${version}
  if [ ! -e "$root/.unpacked" ]; then
    rm -rf "$root"
    dpkg -x "$deb" "$root" || die "dpkg -x $deb failed"
    touch "$root/.unpacked"
  fi
  echo "$root"
}

# Copies a module into DEST as plain .ko (busybox insmod does not decompress).
decompressed_module() {
  local source=$1 dest=$2
  case $source in
    *.ko.xz) xz -dc "$source" >"$dest" ;;
    *.ko.zst) zstd -qdc "$source" >"$dest" ;;
    *.ko.gz) gzip -dc "$source" >"$dest" ;;
    *.ko) cp "$source" "$dest" ;;
    *) die "unknown module compression: $source" ;;
  esac
}

# Builds the guest's initramfs for one unpacked kernel: static busybox, init,
# and the root modules with their dependencies, in load order.
build_initramfs() {
  local root=$1 release=$2 out=$3 staging
  staging=$(mktemp -d "$CACHE_DIR/initramfs.XXXXXX") || die "cannot create a staging directory in $CACHE_DIR"
  mkdir -p "$staging/bin" "$staging/modules" &&
    cp "$BUSYBOX" "$staging/bin/busybox" &&
    install -m 755 "$MATRIX_DIR/init" "$staging/init" || die "cannot stage the initramfs in $staging"

  local -A module_path=() loaded=()
  local file name
  while IFS= read -r -d '' file; do
    name=${file##*/}
    name=${name%%.ko*}
    module_path[${name//-/_}]=$file
  done < <(find "$root/lib/modules/$release" -name '*.ko*' -print0)

  local order=()
  add_module() {
    local name=${1//-/_} dep deps
    [ -n "${loaded[$name]:-}" ] && return
    [ -n "${module_path[$name]:-}" ] || die "$release has no module $name"
    decompressed_module "${module_path[$name]}" "$staging/modules/$name.ko" ||
      die "cannot decompress ${module_path[$name]}"
    deps=$(objcopy -O binary -j .modinfo "$staging/modules/$name.ko" /dev/stdout | tr '\0' '\n' |
      sed -n 's/^depends=//p' | tr ',' ' ')
    loaded[$name]=1
    for dep in $deps; do add_module "$dep"; done
    order+=("$name")
  }
  for name in "${ROOT_MODULES[@]}"; do add_module "$name"; done
  printf '%s\n' "${order[@]}" >"$staging/modules/order"

  # Renamed into place: a concurrent run may be booting the previous one.
  (cd "$staging" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.$$" && mv "$out.$$" "$out" ||
    die "cannot pack $out"
  rm -rf "$staging"
}

# Boots one kernel and runs the suite in it. Returns 0 only if the guest booted,
# finished in time and every test passed; prints the guest's console as it runs.
run_kernel() {
  local package=$1 root release vmlinuz initramfs results start status=0 elapsed
  root=$(fetch_kernel "$package")
  vmlinuz=$(find "$root/boot" -name 'vmlinuz-*' | head -n 1)
  [ -n "$vmlinuz" ] || die "$package has no boot/vmlinuz-*"
  release=${vmlinuz##*/vmlinuz-}
  initramfs=$root/initramfs.cpio.gz
  build_initramfs "$root" "$release" "$initramfs"

  # The PREEMPT_RT guest runs the Python e2e entries of one interpreter per
  # path the BPF walk takes (2.7 and 3.10: frame objects; 3.11, 3.12, 3.13:
  # their interpreter frames; Debian's stripped 3.11: offsets found without
  # symbols), not 3.6 to 3.9, which walk 3.10's path with other offsets
  # (data from user space, not kernel behaviour). The generic guest and the
  # host run every interpreter. It keeps CI inside its 90 minutes.
  local exclude=
  if [ "$(flavour_of "$package")" = rt-amd64 ]; then
    exclude='^PythonProfileTest\.cpython_3_[6-9]$'
    log "$release leaves out the tests matching $exclude (run on the generic kernel and the host)"
  fi
  results=$BUILD_DIR/kernel-matrix/$release
  rm -rf "$results"
  mkdir -p "$results" || die "cannot create $results"
  cat >"$results/job.env" <<EOF
MATRIX_SOURCE_DIR='$REPO_DIR'
MATRIX_BUILD_DIR='$BUILD_DIR'
MATRIX_GUEST_SCRIPT='$MATRIX_DIR/guest-suite.sh'
MATRIX_RESULTS_MOUNT=/run/kernel-matrix-results
MATRIX_CI='${CI:-}'
MATRIX_TEST_TIMEOUT='$TEST_TIMEOUT'
MATRIX_CTEST_ARGS='${ctest_args[*]}'
MATRIX_CTEST_EXCLUDE='$exclude'
EOF

  log "booting $release ($package) under TCG: $GUEST_CPUS CPUs, $GUEST_MEMORY MiB, at most ${GUEST_TIMEOUT}s"
  start=$(date +%s)
  # KVM is not used: a nested KVM guest hangs at boot on this kind of machine.
  # Under TCG the kernel finds the vCPUs' TSCs unsynchronized and falls back
  # to HPET, which has no vDSO clock: clocksource=tsc keeps clock_gettime in
  # the vDSO, as on real machines (the vDSO e2e test samples it there).
  timeout -k 10 "$GUEST_TIMEOUT" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -smp "$GUEST_CPUS" -m "$GUEST_MEMORY" \
    -nodefaults -display none -serial stdio -no-reboot \
    -kernel "$vmlinuz" -initrd "$initramfs" \
    -append "console=ttyS0 panic=-1 quiet clocksource=tsc tsc=reliable" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap" \
    </dev/null 2>&1 | stdbuf -oL tr -d '\r' | sed -u "s/^/[$release] /" | tee "$results/console.log" || status=$?
  elapsed=$(($(date +%s) - start))

  local verdict ran_before=$((PASSED + FAILED)) skipped_before=$SKIPPED
  count_results "$release" "$results/ctest-junit.xml"
  if [ "$status" -eq 124 ]; then
    verdict="TIMED OUT (limit ${GUEST_TIMEOUT}s)"
    status=1
  elif [ ! -s "$results/uname" ]; then
    verdict="did not boot (no suite ran; qemu exit $status)"
    status=1
  elif [ ! -s "$results/status" ]; then
    verdict="suite did not finish"
    status=1
  elif [ "$(cat "$results/status")" != 0 ]; then
    verdict="tests failed"
    status=1
  elif [ $((PASSED + FAILED)) -eq "$ran_before" ]; then
    verdict="ran no test"
    status=1
  elif [ "${CI:-}" = true ] && [ "$SKIPPED" -gt "$skipped_before" ]; then
    # ctest passes a run with skipped entries; in CI a skip is a missing
    # prerequisite (the guest runs with CI=true, where the tests fail rather
    # than skip for one), so a skip there fails the kernel.
    verdict="$((SKIPPED - skipped_before)) tests skipped under CI=true"
    status=1
  else
    verdict="passed"
    status=0
  fi
  local times
  times=$(cat "$results/times" 2>/dev/null || true)
  SUMMARY+=("$(cat "$results/uname" 2>/dev/null || echo "$release"): $verdict in ${elapsed}s${times:+ ($times)}; $COUNTS")
  log "$release: $verdict in ${elapsed}s${times:+ ($times)}; $COUNTS (console log and JUnit report in $results)"
  return "$status"
}

# Counts one guest's tests from ctest's JUnit report into COUNTS ("N passed,
# N failed, N skipped") and adds them to the totals; names each failed and
# each skipped test (a skip in a guest must have a reason: see its log).
count_results() {
  local release=$1 passed=0 failed=0 skipped=0 name status xml
  shift
  for xml in "$@"; do
    [ -s "$xml" ] || continue
    while IFS=$'\t' read -r name status; do
      case $status in
        run) passed=$((passed + 1)) ;;
        fail) failed=$((failed + 1)); NOT_PASSED+=("FAILED $release: $name") ;;
        *) skipped=$((skipped + 1)); NOT_PASSED+=("SKIPPED ($status) $release: $name") ;;
      esac
    done < <(grep -o '<testcase name="[^"]*"[^>]* status="[a-z]*"' "$xml" |
      sed -e 's/^<testcase name="\([^"]*\)".* status="\([a-z]*\)"$/\1\t\2/' -e 's/  # GetParam()[^\t]*//')
  done
  PASSED=$((PASSED + passed))
  FAILED=$((FAILED + failed))
  SKIPPED=$((SKIPPED + skipped))
  COUNTS="$passed passed, $failed failed, $skipped skipped"
}

PASSED=0 FAILED=0 SKIPPED=0 COUNTS=
SUMMARY=() NOT_PASSED=()
overall=0
packages=()
for kernel in "${kernels[@]}"; do packages+=("$(resolve_package "$kernel")"); done
log "kernels: ${packages[*]}; build tree $BUILD_DIR; cache $CACHE_DIR"
for package in "${packages[@]}"; do
  run_kernel "$package" || overall=1
done

log "summary"
for line in "${SUMMARY[@]}"; do log "  $line"; done
for line in "${NOT_PASSED[@]}"; do log "  $line"; done
[ "$overall" -eq 0 ] && [ "$FAILED" -eq 0 ] || overall=1
echo "kernel-matrix: $PASSED passed, $FAILED failed, $SKIPPED skipped"
exit "$overall"
