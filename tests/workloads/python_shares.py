# CPU split about 50/30/20 between hot_a, hot_b and hot_c, each under its own
# caller (caller_a, caller_b, caller_c) called from <module>. An oracle thread
# reads the main thread's frame with sys._current_frames() every 5 ms and
# counts which hot function it is in: the shares an independent sampler
# measured in the same process, for the profile to be compared with. It
# counts from SIGUSR1 to SIGUSR2, which the test sends when the profiler
# starts and stops sampling: both measure the same seconds.
#
#   python python_shares.py SECONDS OUT_FILE
#
# Runs SECONDS or until SIGTERM, then writes one line per hot function to
# OUT_FILE: "NAME FIRST_LINE LAST_LINE ORACLE_SAMPLES" (FIRST_LINE is the def,
# LAST_LINE the function's last line). Runs on Python 2.7 and 3.x.
from __future__ import print_function

import inspect
import signal
import sys
import threading
import time

stopping = []


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


def caller_a(n):
    return hot_a(5 * n)


def caller_b(n):
    return hot_b(3 * n)


def caller_c(n):
    return hot_c(2 * n)


HOT = (hot_a, hot_b, hot_c)


counting = []


def on_sigusr(signum, frame):
    if signum == signal.SIGUSR1:
        counting.append(signum)
    else:
        del counting[:]


def oracle(main_ident, counts, done):
    names = set(counts)
    while not done.is_set():
        time.sleep(0.005)
        if not counting:
            continue
        frame = sys._current_frames().get(main_ident)
        if frame is not None and frame.f_code.co_name in names:
            counts[frame.f_code.co_name] += 1


def main():
    seconds = float(sys.argv[1])
    out_path = sys.argv[2]
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGUSR1, on_sigusr)
    signal.signal(signal.SIGUSR2, on_sigusr)
    # One unit of work lasts about 5 ms, so a round of the three (50 ms) spans
    # several samples at any frequency: no aliasing with the sampler.
    start = time.time()
    calibrate_loop(200000)
    per_iteration = max(time.time() - start, 1e-6) / 200000
    unit = max(1000, int(0.005 / per_iteration))

    counts = dict((f.__name__, 0) for f in HOT)
    done = threading.Event()
    sampler = threading.Thread(target=oracle, args=(threading.current_thread().ident, counts, done))
    sampler.daemon = True
    sampler.start()
    deadline = time.time() + seconds
    while not stopping and time.time() < deadline:
        caller_a(unit)
        caller_b(unit)
        caller_c(unit)
    done.set()
    sampler.join()
    with open(out_path + ".tmp", "w") as out:
        for f in HOT:
            lines, first = inspect.getsourcelines(f)
            print(f.__name__, first, first + len(lines) - 1, counts[f.__name__], file=out)
    # Renamed when whole: the test reads it only once it is there.
    import os
    os.rename(out_path + ".tmp", out_path)


main()
