# Waits for SIGUSR1 (sent once the profiler samples), then burns CPU in
# exiting_hot under exiting_caller for SECONDS and exits: a process that ends
# in the middle of a profiling round.
#
#   python python_exits.py SECONDS READY_FILE
#
# READY_FILE is created once the SIGUSR1 handler is in place (before that
# the signal would end the process).
from __future__ import print_function

import signal
import sys
import time

go = []


def on_sigusr1(signum, frame):
    go.append(signum)


def exiting_hot(deadline):
    total = 0
    while time.time() < deadline:
        i = 0
        while i < 10000:
            total += i & 7
            i += 1
    return total


def exiting_caller(seconds):
    return exiting_hot(time.time() + seconds)


signal.signal(signal.SIGUSR1, on_sigusr1)
open(sys.argv[2], "w").close()
give_up = time.time() + 300
while not go and time.time() < give_up:
    time.sleep(0.05)
if not go:
    sys.exit(1)
exiting_caller(float(sys.argv[1]))
