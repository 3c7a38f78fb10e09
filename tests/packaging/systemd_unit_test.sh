#!/usr/bin/env bash
# The systemd unit (host/systemd/omniprof.service, docs/packaging.md).
#
#   systemd_unit_test.sh verify UNIT OMNIPROF
#     `systemd-analyze verify` accepts the unit: exit 0 and not one line
#     about it (an unknown key or a bad value is only a warning for verify,
#     so warnings fail too). verify checks that ExecStart's binary exists, so
#     it runs on a copy whose ExecStart is OMNIPROF (the build's binary);
#     nothing else is changed. A control copy with an unknown key must be
#     flagged, or this check could not fail.
#
#   systemd_unit_test.sh capabilities UNIT OMNIPROF WORKLOAD
#     The agent samples with exactly the unit's CapabilityBoundingSet, LimitMEMLOCK,
#     LimitNICE (each limit where this machine lets root raise it) and
#     NoNewPrivileges (setpriv, as root: this machine's PID 1 is not systemd,
#     so `systemd-run` cannot run it under the unit itself): `omniprof
#     record` on WORKLOAD (tests/workloads/chain.c, no frame pointers), run
#     as nobody from a 0700 directory, writes samples with stage_a in them
#     and kernel frames named, also once the program's file is deleted. A control without CAP_BPF must fail, or the bounding
#     set would not be in effect. Needs BPF: fails under CI=true when BPF is
#     unusable, skips (77) elsewhere.
set -uo pipefail
mode=$1
unit=$2
omniprof=$3

TEST_NAME=systemd_unit_test
# shellcheck source=tests/packaging/test_support.sh
. "$(dirname "$0")/test_support.sh"
work=$(mktemp -d /tmp/omniprof-unit-XXXXXX) || fail "mktemp failed"
workload_pid=
cleanup() {
  [ -n "$workload_pid" ] && kill "$workload_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

verify() {  # unit file; prints what verify said about it
  SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$1" 2>&1
}

case $mode in
  verify)
    command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing"
    grep -q '^ExecStart=/usr/bin/omniprof run$' "$unit" || fail "$unit does not run /usr/bin/omniprof run"
    mkdir -p "$work/good" "$work/control"
    sed "s|^ExecStart=/usr/bin/omniprof |ExecStart=$omniprof |" "$unit" >"$work/good/omniprof.service"
    out=$(verify "$work/good/omniprof.service")
    status=$?
    echo "$out" | sed 's/^/  /'
    [ "$status" -eq 0 ] || fail "systemd-analyze verify exited $status"
    if echo "$out" | grep -q 'omniprof\.service'; then fail "systemd-analyze verify has something to say about the unit"; fi
    sed 's/^\[Service\]$/[Service]\nProtectSytem=strict/' "$work/good/omniprof.service" >"$work/control/omniprof.service"
    verify "$work/control/omniprof.service" | grep -q "omniprof\.service.*ProtectSytem" ||
      fail "control: verify did not flag an unknown key, so this check cannot fail"
    say "systemd-analyze verify accepts the unit (and flags a misspelt key in a control copy)"
    ;;
  capabilities)
    workload=$4
    [ "$(id -u)" -eq 0 ] || { say "SKIP: needs root"; exit 77; }
    command -v setpriv >/dev/null || fail "setpriv (util-linux) is missing"
    caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
    [ -n "$caps" ] || fail "$unit has no CapabilityBoundingSet"
    grep -q '^NoNewPrivileges=yes$' "$unit" || fail "$unit does not set NoNewPrivileges=yes"
    # CAP_BPF CAP_PERFMON -> -all,+bpf,+perfmon
    bounding="-all$(for c in $caps; do c=${c#CAP_}; printf ',+%s' "${c,,}"; done)"
    # The unit's LimitMEMLOCK= too (systemd sets it before exec): kernels
    # before 5.11 charge BPF maps to RLIMIT_MEMLOCK, and without
    # CAP_SYS_RESOURCE the agent cannot raise it itself. A machine where
    # root cannot raise it either (a container's) runs with its own limit:
    # its kernel is 5.11 or later if BPF works there at all.
    memlock=$(sed -n 's/^LimitMEMLOCK=//p' "$unit")
    [ "$memlock" = infinity ] || fail "$unit does not set LimitMEMLOCK=infinity (5.10 needs it)"
    raised=()  # the unit's limits this machine lets root set
    if prlimit --memlock=unlimited:unlimited true 2>/dev/null; then
      raised+=(--memlock=unlimited:unlimited)
    else
      say "RLIMIT_MEMLOCK cannot be raised here: running with this machine's ($(ulimit -l) KiB)"
    fi
    # LimitNICE= (a nice value: RLIMIT_NICE is 20 - it) lets the agent's
    # event thread take its processes.nice without CAP_SYS_NICE.
    nice=$(sed -n 's/^LimitNICE=//p' "$unit")
    [ -n "$nice" ] || fail "$unit does not set LimitNICE= (the event thread's processes.nice)"
    nice_checked=
    if prlimit --nice=$((20 - nice)):$((20 - nice)) true 2>/dev/null; then
      raised+=(--nice=$((20 - nice)):$((20 - nice)))
      nice_checked=yes
    else
      say "RLIMIT_NICE cannot be raised here: the event thread's nice under LimitNICE=$nice is not checked"
    fi
    limit=()
    [ ${#raised[@]} -eq 0 ] || limit=(prlimit "${raised[@]}" --)
    # The workload runs as nobody from a 0700 directory of nobody's, as a
    # user's program in their home would: reading its maps and memory takes
    # CAP_SYS_PTRACE, its file CAP_DAC_READ_SEARCH (or, through map_files,
    # CAP_CHECKPOINT_RESTORE), so unwinding it tests those too.
    chmod 0711 "$work"
    mkdir -m 0700 "$work/home"
    cp "$workload" "$work/home/workload"
    chown -R nobody:nogroup "$work/home"
    run_with() {  # bounding set, output prefix
      setpriv --reuid=nobody --regid=nogroup --clear-groups "$work/home/workload" 60 &
      workload_pid=$!
      "${limit[@]}" setpriv --bounding-set="$1" --inh-caps=-all --no-new-privs -- \
        env -u OMNIPROF_CONFIG_DIR OMNIPROF_CONFIG_DIR="$work/config" \
        "$omniprof" record -d 2 -p "$workload_pid" -o "$work/$2.pb.gz" >"$work/$2.out" 2>"$work/$2.err"
      local status=$?
      kill "$workload_pid" 2>/dev/null
      wait "$workload_pid" 2>/dev/null
      workload_pid=
      return "$status"
    }
    mkdir -p "$work/config"  # an empty config tree: the defaults, as the unit's /etc would start
    say "bounding set: $bounding"
    run_with "$bounding" unit
    status=$?
    sed 's/^/  /' "$work/unit.err" "$work/unit.out"
    if [ "$status" -ne 0 ] && grep -qE 'needs root|cannot be loaded here|perf events are unavailable|no BTF' "$work/unit.err"; then
      # The BPF check failed: is BPF usable here at all, with every capability?
      if run_with -all,+all full; then
        fail "omniprof record works with all capabilities but not with the unit's: $(head -n 3 "$work/unit.err")"
      fi
      [ "${CI:-}" = true ] && fail "BPF unusable in CI: $(head -n 1 "$work/full.err")"
      say "SKIP: BPF unusable here: $(head -n 1 "$work/full.err")"
      exit 77
    fi
    [ "$status" -eq 0 ] || fail "omniprof record exited $status with the unit's capabilities"
    samples=$(sed -n 's/^wrote .* (\([0-9]*\) samples)$/\1/p' "$work/unit.out")
    [ -n "$samples" ] && [ "$samples" -gt 0 ] || fail "no samples with the unit's capabilities"
    grep -q ' stage_a$' "$work/unit.out" || fail "no stage_a frame with the unit's capabilities"
    if grep -q 'kernel frames will not be named' "$work/unit.err"; then
      fail "kernel symbols unreadable with the unit's capabilities (CAP_SYSLOG)"
    fi
    if [ -n "$nice_checked" ] && grep -q 'processes.nice' "$work/unit.err"; then
      fail "the event thread cannot take its nice under the unit's LimitNICE=$nice: $(grep 'processes.nice' "$work/unit.err")"
    fi
    # A program whose file was deleted after it started (an upgrade replaced
    # it) is only reachable through /proc/PID/map_files, which takes
    # CAP_CHECKPOINT_RESTORE: its frames must still be named.
    cp "$work/home/workload" "$work/home/deleted"
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$work/home/deleted" 60 &
    workload_pid=$!
    sleep 0.3
    rm "$work/home/deleted"
    "${limit[@]}" setpriv --bounding-set="$bounding" --inh-caps=-all --no-new-privs -- \
      env OMNIPROF_CONFIG_DIR="$work/config" \
      "$omniprof" record -d 2 -p "$workload_pid" -o "$work/deleted.pb.gz" >"$work/deleted.out" 2>"$work/deleted.err"
    status=$?
    kill "$workload_pid" 2>/dev/null
    wait "$workload_pid" 2>/dev/null
    workload_pid=
    [ "$status" -eq 0 ] || { cat "$work/deleted.err"; fail "omniprof record exited $status on a deleted program"; }
    grep -q ' stage_a$' "$work/deleted.out" || { cat "$work/deleted.out"; fail "a deleted program's frames are not named with the unit's capabilities (map_files)"; }
    # CAP_SYS_ADMIN is in the unit for Debian's kernel.perf_event_paranoid=3
    # only: at 2 or lower the others suffice (the drop-in docs/packaging.md
    # gives), at 3 perf_event_open needs it (a clear refusal without it).
    minimal=${bounding/,+sys_admin/}
    paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
    if run_with "$minimal" minimal; then
      [ "$paranoid" -le 2 ] || fail "kernel.perf_event_paranoid=$paranoid, yet perf events opened without CAP_SYS_ADMIN"
      without_admin="without CAP_SYS_ADMIN (perf_event_paranoid=$paranoid): works too"
    else
      [ "$paranoid" -gt 2 ] || { cat "$work/minimal.err"; fail "without CAP_SYS_ADMIN at kernel.perf_event_paranoid=$paranoid"; }
      grep -q 'perf_event_paranoid' "$work/minimal.err" || { cat "$work/minimal.err"; fail "the refusal without CAP_SYS_ADMIN does not name kernel.perf_event_paranoid"; }
      without_admin="without CAP_SYS_ADMIN (perf_event_paranoid=$paranoid): refused, naming the sysctl"
    fi
    without_bpf=${minimal/,+bpf/}
    if run_with "$without_bpf" control; then
      fail "control: omniprof record worked without CAP_BPF and CAP_SYS_ADMIN, so the bounding set is not in effect"
    fi
    say "with the unit's capabilities only: $samples samples of nobody's program in a 0700 directory, stage_a unwound (also once its file is deleted), kernel symbols read; $without_admin; without CAP_BPF and CAP_SYS_ADMIN: refused ($(head -n 1 "$work/control.err"))"
    ;;
  *) fail "unknown mode $mode (verify or capabilities)" ;;
esac
