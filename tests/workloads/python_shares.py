# CPU split about 50/30/20 between hot_a, hot_b and hot_c, each under its own
# caller (caller_a, caller_b, caller_c) called from main under <module>. Each
# caller measures the CPU time of its hot function's call with the thread's
# own CPU clock (CLOCK_THREAD_CPUTIME_ID, the kernel's account of the time
# this thread ran): the shares the profile must show, measured without
# sampling. The clock counts from SIGUSR1 to SIGUSR2, which the test sends
# when the profiler starts and stops sampling, so both measure the same
# seconds. A sampler thread reading sys._current_frames() would be a second
# sample, as noisy as the profile (and on 2.7 it reads only when it wins the
# GIL). This is ruby_shares.rb's design.
#
#   python python_shares.py SECONDS OUT_FILE READY_FILE
#
# READY_FILE is created once the signal handlers are in place: a signal
# sent before that would end the process (the default action), and a
# process starting among eight busy threads on an emulated guest can take
# many seconds to get there.
#
# Runs SECONDS or until SIGTERM, then writes one line per hot function to
# OUT_FILE: "NAME FIRST_LINE LAST_LINE CPU_MICROSECONDS" (FIRST_LINE is the
# def, LAST_LINE the function's last line). Runs on Python 2.7 and 3.x.
from __future__ import print_function

import inspect
import os
import signal
import sys
import time

stopping = []

if hasattr(time, "clock_gettime"):  # Python 3.3 and later

    def thread_cpu_seconds():
        return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)

else:  # Python 2.7: clock_gettime(2) through ctypes
    import ctypes

    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    CLOCK_THREAD_CPUTIME_ID = 3  # <linux/time.h>

    def thread_cpu_seconds():
        now = Timespec()
        if libc.clock_gettime(CLOCK_THREAD_CPUTIME_ID, ctypes.byref(now)) != 0:
            raise OSError(ctypes.get_errno(), "clock_gettime(CLOCK_THREAD_CPUTIME_ID)")
        return now.tv_sec + now.tv_nsec * 1e-9


def on_sigterm(signum, frame):
    stopping.append(signum)


def calibrate_loop(n):
    total = 0
    i = 0
    while i < n:
        total += i & 7
        i += 1
    return total


# The three hot functions do the same work on purpose: their shares are set
# by how much each caller asks of it (5:3:2). Each spins in its own body, not
# in a shared helper, so that it is the Python leaf of its samples.
def hot_a(n):
    total = 0
    i = 0
    while i < n:
        total += i & 7
        i += 1
    return total


def hot_b(n):
    total = 0
    i = 0
    while i < n:
        total += i & 7
        i += 1
    return total


def hot_c(n):
    total = 0
    i = 0
    while i < n:
        total += i & 7
        i += 1
    return total


HOT = (hot_a, hot_b, hot_c)
cpu = dict((f.__name__, 0.0) for f in HOT)
counting = []


def count(name, start):
    """Adds the CPU time of one hot call, while the window is open.

    A call lasts milliseconds (more emulated): the calls cut by the window's
    ends are a small part of its seconds."""
    if counting:
        cpu[name] += thread_cpu_seconds() - start


# The callers call the hot functions themselves, so that a hot function's
# caller is its Python parent.
def caller_a(n):
    start = thread_cpu_seconds()
    hot_a(5 * n)
    count("hot_a", start)


def caller_b(n):
    start = thread_cpu_seconds()
    hot_b(3 * n)
    count("hot_b", start)


def caller_c(n):
    start = thread_cpu_seconds()
    hot_c(2 * n)
    count("hot_c", start)


def on_sigusr(signum, frame):
    if signum == signal.SIGUSR1:
        counting.append(signum)
    else:
        del counting[:]


def main():
    seconds = float(sys.argv[1])
    out_path = sys.argv[2]
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGUSR1, on_sigusr)
    signal.signal(signal.SIGUSR2, on_sigusr)
    open(sys.argv[3], "w").close()
    # One unit of work lasts about 5 ms, so a round of the three (50 ms) spans
    # several samples at any frequency: no aliasing with the sampler.
    start = time.time()
    calibrate_loop(200000)
    per_iteration = max(time.time() - start, 1e-6) / 200000
    unit = max(1000, int(0.005 / per_iteration))

    deadline = time.time() + seconds
    while not stopping and time.time() < deadline:
        caller_a(unit)
        caller_b(unit)
        caller_c(unit)
    with open(out_path + ".tmp", "w") as out:
        for f in HOT:
            lines, first = inspect.getsourcelines(f)
            print(f.__name__, first, first + len(lines) - 1, int(round(cpu[f.__name__] * 1e6)), file=out)
    # Renamed when whole: the test reads it only once it is there.
    os.rename(out_path + ".tmp", out_path)


main()
