# A short-lived Python process: the short-lived Python test
# (tests/e2e/early_samples_test.cpp) starts it 100 times in a row from a shell
# loop. It burns CPU_MS milliseconds of its own CPU time in
# shortpy_leaf <- shortpy_middle <- shortpy_outer <- <module>, then exits.
# shortpy_outer names the thread "shortpy_hot" while it runs (through
# /proc/self/comm, which is the main thread's name; no ctypes to import), so
# the test knows the samples taken then by their thread_name label, which BPF
# reads from the kernel at each sample, whatever the profiler knows of the
# process.
#
#   python python_short_lived.py CPU_MS
import sys
import time


def shortpy_name(name):
    with open("/proc/self/comm", "w") as comm:
        comm.write(name)


def shortpy_leaf(n):
    total = 0
    i = 0
    while i < n:
        total += i & 7
        i += 1
    return total


def shortpy_middle(until):
    total = 0
    while time.thread_time() < until:
        total += shortpy_leaf(2000)
    return total


def shortpy_outer(seconds):
    shortpy_name("shortpy_hot")
    try:
        return shortpy_middle(time.thread_time() + seconds)
    finally:
        shortpy_name("shortpy_end")


shortpy_outer(float(sys.argv[1]) / 1000)
