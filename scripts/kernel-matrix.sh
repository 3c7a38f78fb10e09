#!/usr/bin/env bash
# The kernel matrix: boots the Debian kernels users run (bullseye's 5.10,
# bookworm's 6.1 generic and PREEMPT_RT, trixie's 6.12; each the newest of
# its line in the Debian archive, fetched with `apt-get download`) in QEMU,
# some at once, and runs the kernel-facing test suite of the already-built
# tree inside each, against this machine's root filesystem shared read-only
# over virtio 9p. Prints each guest's `uname -r`, each test's result and a
# summary; exits non-zero if a guest does not boot, runs out of time, or a
# test fails. docs/kernel-matrix.md tells more.
#
# Usage: scripts/kernel-matrix.sh [KERNEL|PACKAGE]... [-- CTEST_ARGS...]
#   KERNEL is 5.10, 6.1, 6.1-rt or 6.12 (default: all four; amd64 and
#   rt-amd64 name 6.1 and 6.1-rt), PACKAGE a linux-image-* package of one of
#   them; CTEST_ARGS go to ctest in each guest (e.g. -R Record).
# Environment:
#   OMNIPROF_BUILD_DIR                build tree to test (default: build)
#   OMNIPROF_KERNEL_MATRIX_CACHE      apt's lists, downloaded and unpacked kernels
#                                     (default: /var/cache/omniprof/kernel-matrix)
#   OMNIPROF_KERNEL_MATRIX_TIMEOUT    seconds per guest, boot to power-off (default: 2400)
#   OMNIPROF_KERNEL_MATRIX_TEST_TIMEOUT  seconds per test in the guest (default: 600)
#   OMNIPROF_KERNEL_MATRIX_CPUS / _MEMORY  guest CPUs (default: nproc) / MiB (default: 4096)
#   OMNIPROF_KERNEL_MATRIX_PARALLEL   guests running at once (default: 2)
#   OMNIPROF_KERNEL_MATRIX_EXCLUDE    ctest -E regex each guest leaves out instead
#                                     of guest_exclude's (set and empty: none)
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
PARALLEL=${OMNIPROF_KERNEL_MATRIX_PARALLEL:-2}
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

for tool in qemu-system-x86_64 busybox cpio gzip objcopy readelf apt-get apt-cache dpkg timeout xz zstd; do
  command -v "$tool" >/dev/null || die "$tool is missing (run ./scripts/install-deps.sh)"
done
BUSYBOX=$(command -v busybox)
! readelf -l "$BUSYBOX" | grep -q 'program interpreter' ||
  die "$BUSYBOX is not static: the initramfs needs busybox-static"
[ -x "$BUILD_DIR/bin/omniprof" ] || die "$BUILD_DIR/bin/omniprof is missing (run ./scripts/build.sh first)"
mkdir -p "$CACHE_DIR"

# The kernels the matrix knows, by the name a user asks for: the Debian
# release that ships each and the pattern of its image package (the
# -unsigned form where the archive has one: the same kernel and modules as
# the signed). amd64 and rt-amd64 are the older names of 6.1 and 6.1-rt.
declare -A KERNEL_SUITES=(
  [5.10]="bullseye bullseye-security"
  [6.1]="bookworm bookworm-updates bookworm-security"
  [6.1-rt]="bookworm bookworm-updates bookworm-security"
  [6.12]="trixie trixie-updates trixie-security"
)
declare -A KERNEL_PATTERN=(
  [5.10]='^linux-image-5\.10\.0-[0-9]+-amd64'
  [6.1]='^linux-image-6\.1\.0-[0-9]+-amd64'
  [6.1-rt]='^linux-image-6\.1\.0-[0-9]+-rt-amd64'
  [6.12]='^linux-image-6\.12\.[0-9]+\+deb13-amd64'
)
# In this order, two at a time: the two longest, 6.1 (the kernel-facing
# suite) and 5.10 (its core; its walks take tail calls), first; then 6.12 and
# 6.1-rt (guest_exclude).
ALL_KERNELS=(6.1 5.10 6.12 6.1-rt)
[ ${#kernels[@]} -gt 0 ] || kernels=("${ALL_KERNELS[@]}")

# apt, reading its own lists of the three Debian releases from the cache
# directory (signed as apt checks them), not the system's: this machine's
# sources name one release. Nothing is installed.
APT_DIR=$CACHE_DIR/apt
apt_options=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::State::Status=$APT_DIR/status"
  -o "Dir::Cache=$APT_DIR/cache" -o "APT::Architecture=amd64" -o "APT::Sandbox::User=root")

# Reads the lists once a day (a fresh machine's first run reads them).
update_apt_lists() {
  local suite suites=() url
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  touch "$APT_DIR/status"
  for kernel in "${ALL_KERNELS[@]}"; do suites+=(${KERNEL_SUITES[$kernel]}); done
  : >"$APT_DIR/sources.list.new"
  for suite in $(printf '%s\n' "${suites[@]}" | sort -u); do
    case $suite in *-security) url=http://deb.debian.org/debian-security ;; *) url=http://deb.debian.org/debian ;; esac
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $url $suite main" >>"$APT_DIR/sources.list.new"
  done
  if cmp -s "$APT_DIR/sources.list.new" "$APT_DIR/sources.list" &&
    [ -n "$(find "$APT_DIR/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -n 1)" ]; then
    rm -f "$APT_DIR/sources.list.new"
    return
  fi
  mv "$APT_DIR/sources.list.new" "$APT_DIR/sources.list"
  log "reading the package lists of $(printf '%s\n' "${suites[@]}" | sort -u | tr '\n' ' ')into $APT_DIR/lists"
  apt-get "${apt_options[@]}" update -qq 2>&1 | grep -v 'unsandboxed' >&2 ||
    true
  [ -n "$(find "$APT_DIR/lists" -maxdepth 1 -name '*_Packages*' | head -n 1)" ] ||
    die "apt-get update read no package list (is deb.debian.org reachable?)"
}

# The kernel's name for a package name (the first whose pattern matches).
kernel_of() {
  local package=$1 kernel
  for kernel in "${ALL_KERNELS[@]}"; do
    if [[ $package =~ ${KERNEL_PATTERN[$kernel]}(-unsigned)?$ ]]; then
      echo "$kernel"
      return
    fi
  done
  die "$package is none of the kernels the matrix knows (${ALL_KERNELS[*]})"
}

# Newest package of a kernel: unsigned if the archive has it, else signed.
resolve_package() {
  local wanted=$1 suffix name
  case $wanted in
    linux-image-*) kernel_of "$wanted" >/dev/null; echo "$wanted"; return ;;
    amd64) wanted=6.1 ;;
    rt-amd64) wanted=6.1-rt ;;
  esac
  [ -n "${KERNEL_PATTERN[$wanted]:-}" ] || die "unknown kernel $wanted (known: ${ALL_KERNELS[*]}, or a package name)"
  for suffix in -unsigned ""; do
    name=$(apt-cache "${apt_options[@]}" search --names-only "${KERNEL_PATTERN[$wanted]}${suffix}\$" 2>/dev/null |
      awk '{print $1}' | sort -V | tail -n 1)
    if [ -n "$name" ]; then
      echo "$name"
      return
    fi
  done
  die "no package of kernel $wanted (${KERNEL_PATTERN[$wanted]}) in ${KERNEL_SUITES[$wanted]}"
}

# Removes the cached packages and trees of the same kernel as PACKAGE but of
# another ABI or version (about 470 MB each): a new kernel replaces the old.
prune_older() {
  local package=$1 version=$2 entry name kernel
  kernel=$(kernel_of "$package")
  for entry in "$CACHE_DIR"/linux-image-*; do
    [ -e "$entry" ] || continue
    name=${entry##*/}
    name=${name%%_*}
    [ "$(kernel_of "$name" 2>/dev/null)" = "$kernel" ] || continue
    case ${entry##*/} in
      "${package}_${version}" | "${package}_${version//:/%3a}_amd64.deb") ;;
      *) log "removing the superseded $entry" >&2; rm -rf "$entry" ;;
    esac
  done
}

# Downloads (once) and unpacks (once) a kernel package; prints its unpacked root.
fetch_kernel() {
  local package=$1 version deb root
  version=$(apt-cache "${apt_options[@]}" show --no-all-versions "$package" 2>/dev/null | sed -n 's/^Version: //p' | head -n 1)
  [ -n "$version" ] || die "apt knows no version of $package"
  deb=$CACHE_DIR/${package}_${version//:/%3a}_amd64.deb
  if [ ! -s "$deb" ]; then
    log "downloading $package $version into $CACHE_DIR" >&2
    # apt-get download names the file itself; _apt cannot write to a root-owned
    # cache, which makes apt warn and download as root: that is fine here.
    (cd "$CACHE_DIR" && apt-get "${apt_options[@]}" download -q "$package=$version" 2>&1 | grep -v 'unsandboxed' >&2) || true
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
  done < <(find "$root/lib/modules/$release" "$root/usr/lib/modules/$release" -name '*.ko*' -print0 2>/dev/null)
  local builtin
  builtin=$(cat "$root/lib/modules/$release/modules.builtin" "$root/usr/lib/modules/$release/modules.builtin" 2>/dev/null |
    sed 's|.*/||; s|\.ko$||; s|-|_|g')

  local order=()
  add_module() {
    local name=${1//-/_} dep deps
    [ -n "${loaded[$name]:-}" ] && return
    # Built into this kernel (virtio_pci is, in some): nothing to load.
    if [ -z "${module_path[$name]:-}" ] && grep -qx "$name" <<<"$builtin"; then
      loaded[$name]=1
      return
    fi
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

# Fetches one kernel and builds its initramfs (one kernel at a time: apt and
# the cache are not shared between guests); prints "RELEASE VMLINUZ INITRAMFS".
prepare_kernel() {
  local package=$1 root vmlinuz release
  root=$(fetch_kernel "$package")
  vmlinuz=$(find "$root/boot" -name 'vmlinuz-*' | head -n 1)
  [ -n "$vmlinuz" ] || die "$package has no boot/vmlinuz-*"
  release=${vmlinuz##*/vmlinuz-}
  build_initramfs "$root" "$release" "$root/initramfs.cpio.gz"
  echo "$release $vmlinuz $root/initramfs.cpio.gz"
}

# What a kernel's guest leaves out of the suite (a ctest -E regex), printed
# when it boots; the host runs all of it. Together they keep CI inside its
# time on a slow day (docs/kernel-matrix.md has the figures and the reasons).
# Every guest leaves out what asks nothing of the kernel that differs between
# kernels, user space over BPF that other entries load and walk in the same
# guest:
# - the unit suites (UnitSuite.*): unit tests run on the host only;
# - `omniprof config`, `debug unwind-table`, the refusals of a user without
#   privileges and of an unwritable output, the plugin listing's ABI
#   versions and disabled runtimes, the installed tree's layout, the names a
#   process maps its files by, the run's rounds on SIGTERM;
# - tables built and named in user space over walks the same guest makes:
#   the static, shared and non-PIE variants of the C chain, names from
#   function starts, a stripped Ruby's debug file, libruby embedded in a
#   program, a libpython dlopen()ed, the big executables' cold page cache
#   and tables being built, a process known at start dlopen()ing;
# - whether a round drained when maps fill shows what a drain every second
#   showed (the draining itself stays: RunDrainTest.DrainsWhen... in 6.1);
# - the storm of short processes whose records the event thread reads on a
#   clock (user space's pacing: an emulated guest starts ~40 processes a
#   second, under the storm's rate; the records themselves stay, in the
#   short-lived tests beside it);
# - of the Pythons, those that between them take every branch of the BPF
#   walk (one program for all versions, driven by offsets: data from user
#   space): pyenv's 2.7 (frame objects, the old GIL), 3.11 (its interpreter
#   frames under a _PyCFrame, 3.7's GIL) and Debian's 3.14 (3.12's frames and
#   owners, the per-interpreter GIL, tagged stack references); not 3.6 to
#   3.10, 3.12, 3.13, Debian's stripped 3.11, Debian 13's 3.13 and sid's
#   3.15, which take those branches with other offsets and differ beyond them
#   in finding symbols (user space); a libpython linked into a C program on
#   pyenv's 3.12 and Debian's 3.14;
# - versions without offsets, newer than known, the naming of stripped
#   3.11's functions from their FDEs, the short-lived Python scripts (their
#   kernel side, process records and the ring buffer that asks for a tick, is
#   the C program's short-lived test), the export, and the run's output
#   directory going away.
# 6.1 (Debian 12's kernel) runs the rest: the kernel-facing suite. 5.10 (no
# bpf_loop, no bpf_find_vma, maps charged to RLIMIT_MEMLOCK) runs its core:
# every plugin's programs loaded and walked (the C chain, threads, recursion
# to the tail-call budget, the vDSO, the walk without bpf_loop, three Python
# paths: 2.7's frame objects, 3.11's interpreter frames and 3.14's tagged
# references; Ruby, Node.js's perf map, a third party's plugin, a linked
# libpython), the maps and their drains, exec, fork, exit and dlopen
# notices, kernel stacks, the deepest stack's tail calls and the big
# executables' tables in the default budget. 6.12 (a newer verifier) and
# 6.1-rt (PREEMPT_RT) run what a newer verifier or preemption could change:
# every plugin's programs loaded and walked (the C chain, threads,
# recursion, the vDSO; 2.7's, 3.11's and 3.14's Python on 6.12, 3.11's and
# 3.14's on 6.1-rt; Ruby, the perf map, the SDK's plugin), the maps and
# their drains, exec, fork and exit, kernel stacks. Left to 6.1: the limits
# of the native walk, dlopen, the pid filter, frame pointers, the small
# budget, a memfd's and a replaced file's mappings, cgroups, the unit's
# capabilities, refused third-party plugins, drains when maps fill.
FULL_SUITE_KERNEL=6.1
guest_exclude() {
  local kernel=$1 exclude=()
  exclude+=('^UnitSuite\.' '^ConfigCommandTest\.' '^DebugUnwindTableTest\.')
  exclude+=('^RecordTest\.(NotRootGivesOneLineAndNonZeroExit|UnwritableOutputFailsBeforeSamplingWithOneLine)$')
  exclude+=('^PluginsTest\.(ListingSaysWhichVersionsTheHostAcceptsAndARefusedPluginsOwn|RuntimeDisabledInConfigIsListedAsDisabled|DisabledRuntimesPluginFileIsNeverOpened|DetectProcessSeesTheNamesTheProcessMapsItsFilesBy)$')
  exclude+=('^InstallTest\.' '^RunTest\.(DisabledRuntimesPluginsAreNotInTheAgentsMemory|WritesOneProfilePerRoundAndTheInterruptedRoundOnSigterm)$')
  exclude+=('^Workloads/DwarfUnwindTest\..*/chain_nofp_(static|shared|nopie)' '^FunctionStartNamesTest\.')
  exclude+=('^RubyPluginLimitsTest\.StrippedRubyWithItsDebugFileIsWalked$' '^RubyEmbeddedTest\.')
  exclude+=('^Libpythons/PythonEmbeddedTest\.LibpythonDlopenedAfterDescriptionIsFoundOnRefresh/')
  exclude+=('^BigExecutablesTest\.(RecordOnColdPageCacheWaitsForTablesAndWalksWhole|RunCountsWalksThatMeetATableBeingBuilt)$')
  exclude+=('^LateDlopenTest\.LibraryCalledAtOnceByAProcessKnownSinceStartIsWalkedWhole$')
  exclude+=('^RunDrainTest\.ARoundShowsTheStacksADrainEverySecondWithTheFormerMapsShowed$')
  exclude+=('^ShortLivedProcessTest\.InAStormOfProcessesRecordsAreReadOnAClockAndRunsStayWhole$')
  exclude+=('^PythonProfileTest\.(cpython_3_([6-9]|1[023])|debian_python3_11_stripped|debian13_python3_13|debian_python3_15)$')
  exclude+=('^Libpythons/PythonEmbeddedTest\.LinkedLibpythonGivesPythonFramesUnderTheProgramsMain/(debian13_python3_13|debian_python3_15)')
  exclude+=('^PythonEmbeddedUnsupportedTest\.' '^RubyPluginLimitsTest\.UnsupportedOrStrippedRubyIsOneLogLine')
  exclude+=('^Interpreters/ShortLivedPythonTest\.' '^PythonNewerVersionTest\.')
  exclude+=('^ExportTest\.' '^RunTest\.RoundsSurviveTheirDirectoryRemovedOrUnwritable$')
  if [ "$kernel" != "$FULL_SUITE_KERNEL" ]; then
    exclude+=('^Workloads/DwarfUnwindTest\..*/dlopen_nofp' '^DwarfUnwindLimitsTest\.ExitedProcessReleasesItsExecutables$')
    exclude+=('^RecordTest\.PidFilterKeepsOnlyThatProcess$' '^BigExecutablesTest\.SmallBudgetRefusesWhatCannotFitAndKeepsSampling$')
    exclude+=('^Libpythons/PythonEmbeddedTest\.LinkedLibpythonGivesPythonFramesUnderTheProgramsMain/debian')
    exclude+=('^MemfdExecutableTest\.' '^LibraryFile/ReplacedFileTest\.' '^ResourceAttributesTest\.' '^Systemd\.')
    exclude+=('^PluginsTest\.LoadsAThirdPartyPluginAndRefusesBadOnesWithReasons$' '^RunDrainTest\.')
    if [ "$kernel" != 5.10 ]; then
      exclude+=('^BigExecutablesTest\.' '^DwarfUnwindLimitsTest\.' '^LateDlopenTest\.' '^RecordTest\.FramePointerChainIsWholeInNinetyPercentOfLeafSamples$')
      exclude+=('^RubyPluginLimitsTest\.' '^Libpythons/PythonEmbeddedTest\.')
    fi
    [ "$kernel" != 6.1-rt ] || exclude+=('^PythonProfileTest\.cpython_2_7$')
  fi
  local IFS='|'
  echo "${exclude[*]}"
}

# Boots one prepared kernel and runs the suite in it; leaves its verdict in
# its results directory (verdict, tally, not-passed) for the summary. Returns
# 0 only if the guest booted, finished in time and every test passed; prints
# the guest's console as it runs, each line prefixed with its release.
run_kernel() {
  local package=$1 release=$2 vmlinuz=$3 initramfs=$4 kernel exclude results start status=0 elapsed
  kernel=$(kernel_of "$package")
  if [ "${OMNIPROF_KERNEL_MATRIX_EXCLUDE+set}" = set ]; then
    exclude=$OMNIPROF_KERNEL_MATRIX_EXCLUDE
  else
    exclude=$(guest_exclude "$kernel")
  fi
  [ -z "$exclude" ] || log "$release leaves out the entries matching $exclude (see guest_exclude in $0)"
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

  local verdict passed failed skipped
  read -r passed failed skipped < <(count_results "$release" "$results/ctest-junit.xml" "$results/not-passed")
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
  elif [ $((passed + failed)) -eq 0 ]; then
    verdict="ran no test"
    status=1
  elif [ "${CI:-}" = true ] && [ "$skipped" -gt 0 ]; then
    # ctest passes a run with skipped entries; in CI a skip is a missing
    # prerequisite (the guest runs with CI=true, where the tests fail rather
    # than skip for one), so a skip there fails the kernel.
    verdict="$skipped tests skipped under CI=true"
    status=1
  else
    verdict="passed"
    status=0
  fi
  local times line
  times=$(cat "$results/times" 2>/dev/null || true)
  line="$(cat "$results/uname" 2>/dev/null || echo "$release"): $verdict in ${elapsed}s${times:+ ($times)}; $passed passed, $failed failed, $skipped skipped"
  echo "$line" >"$results/verdict"
  echo "$passed $failed $skipped $status" >"$results/tally"
  log "$line (console log and JUnit report in $results)"
  return "$status"
}

# Counts one guest's tests from ctest's JUnit report; prints "PASSED FAILED
# SKIPPED" and writes one line per failed and per skipped test into
# NOT_PASSED (a skip in a guest must have a reason: see its log).
count_results() {
  local release=$1 xml=$2 not_passed=$3 passed=0 failed=0 skipped=0 name status
  : >"$not_passed"
  if [ -s "$xml" ]; then
    while IFS=$'\t' read -r name status; do
      case $status in
        run) passed=$((passed + 1)) ;;
        fail) failed=$((failed + 1)); echo "FAILED $release: $name" >>"$not_passed" ;;
        *) skipped=$((skipped + 1)); echo "SKIPPED ($status) $release: $name" >>"$not_passed" ;;
      esac
    done < <(grep -o '<testcase name="[^"]*"[^>]* status="[a-z]*"' "$xml" |
      sed -e 's/^<testcase name="\([^"]*\)".* status="\([a-z]*\)"$/\1\t\2/' -e 's/  # GetParam()[^\t]*//')
  fi
  echo "$passed $failed $skipped"
}

# gtest's failure reports in a guest's console: each "FILE:LINE: Failure"
# line and the two after it (the expectation and its message), every line cut
# at 400 characters, 60 lines at most.
failure_lines() {
  awk '/: Failure$/ { left = 3 } left > 0 { print "kernel-matrix:   " substr($0, 1, 400); left--; shown++ }
       shown >= 60 { exit }' "$1"
}

update_apt_lists
packages=()
for kernel in "${kernels[@]}"; do packages+=("$(resolve_package "$kernel")"); done
log "kernels: ${packages[*]}; build tree $BUILD_DIR; cache $CACHE_DIR; $PARALLEL guests at a time"
prepared=()
for package in "${packages[@]}"; do prepared+=("$package $(prepare_kernel "$package")"); done

# PARALLEL guests at a time: under TCG a guest's suite spends much of its
# time in tests that record for fixed durations, which leaves the machine's
# cores to another guest (docs/kernel-matrix.md has the figures).
releases=()
running=0
for entry in "${prepared[@]}"; do
  read -r package release vmlinuz initramfs <<<"$entry"
  releases+=("$release")
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_kernel "$package" "$release" "$vmlinuz" "$initramfs" &
  running=$((running + 1))
done
wait || true

log "summary"
PASSED=0 FAILED=0 SKIPPED=0 overall=0
for release in "${releases[@]}"; do
  results=$BUILD_DIR/kernel-matrix/$release
  if [ -s "$results/tally" ]; then
    read -r passed failed skipped status <"$results/tally"
    log "  $(cat "$results/verdict")"
  else
    passed=0 failed=0 skipped=0 status=1
    log "  $release: the guest's run ended without a verdict"
  fi
  PASSED=$((PASSED + passed)) FAILED=$((FAILED + failed)) SKIPPED=$((SKIPPED + skipped))
  [ "$status" -eq 0 ] || overall=1
done
for release in "${releases[@]}"; do
  [ ! -s "$BUILD_DIR/kernel-matrix/$release/not-passed" ] ||
    sed 's/^/kernel-matrix:   /' "$BUILD_DIR/kernel-matrix/$release/not-passed"
done
# What each failed test said, here at the end: CI shows a run's last lines,
# and a failure's own words were lost in the middle of a guest's console.
for release in "${releases[@]}"; do
  grep -q '^FAILED' "$BUILD_DIR/kernel-matrix/$release/not-passed" 2>/dev/null || continue
  failure_lines "$BUILD_DIR/kernel-matrix/$release/console.log"
done
[ "$overall" -eq 0 ] && [ "$FAILED" -eq 0 ] || overall=1
echo "kernel-matrix: $PASSED passed, $FAILED failed, $SKIPPED skipped"
exit "$overall"
