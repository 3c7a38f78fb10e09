# A short Python script for the short-lived e2e test
# (tests/e2e/early_samples_test.cpp, ShortLivedPythonTest): names its thread
# py_short_hot (through /proc/self/comm), spends CPU_MS of its own CPU time
# in short_hot <- short_middle <- <module>, then names it py_short_end and
# exits. Started 100 times in a row by a shell loop.
import sys
import time


def short_hot(until):
    n = 0
    while time.process_time() < until:
        n += 1
    return n


def short_middle(until):
    return short_hot(until)


def rename(name):
    with open("/proc/self/comm", "w") as comm:
        comm.write(name)


cpu_ms = float(sys.argv[1])
rename("py_short_hot")
short_middle(time.process_time() + cpu_ms / 1000)
rename("py_short_end")
