# recurse() calls itself until DEPTH frames of it are on the stack, spins in
# the deepest one, returns and starts again: nearly every sample holds DEPTH
# recurse frames above <module>. At the end (SECONDS, or SIGTERM) prints
# "recursions_per_second N": the throughput the overhead benchmark compares.
#
#   python python_recursion.py DEPTH SECONDS [SPIN]
from __future__ import print_function

import signal
import sys
import time

stopping = []
signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))


def recurse(n, spin):
    if n > 1:
        return recurse(n - 1, spin)
    total = 0
    i = 0
    while i < spin:
        total += i & 7
        i += 1
    return total


depth = int(sys.argv[1])
seconds = float(sys.argv[2])
spin = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
start = time.time()
calls = 0
while not stopping and time.time() - start < seconds:
    recurse(depth, spin)
    calls += 1
print("recursions_per_second", calls / (time.time() - start))
sys.stdout.flush()
