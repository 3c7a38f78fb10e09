# recurse() calls itself until DEPTH frames of it are on the stack, spins in
# the deepest one, returns and starts again: nearly every sample holds DEPTH
# recurse frames above <module>.
#
#   python python_recursion.py DEPTH SECONDS
from __future__ import print_function

import sys
import time


def recurse(n):
    if n > 1:
        return recurse(n - 1)
    total = 0
    i = 0
    while i < 200000:
        total += i & 7
        i += 1
    return total


depth = int(sys.argv[1])
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    recurse(depth)
