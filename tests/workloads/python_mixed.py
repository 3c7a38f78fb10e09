# Python and native frames interleaved. The main thread sorts with a Python
# key function (sort_key, called by the interpreter's C sort under
# sort_caller); a second thread calls burn_cpu in a C library through ctypes
# (burn_cpu under call_burn).
#
#   python python_mixed.py SECONDS BURN_LIBRARY
from __future__ import print_function

import ctypes
import sys
import threading
import time


def sort_key(x):
    v = x
    for _ in range(20):
        v = (v * 31 + 7) % 1000003
    return v


def sort_caller(data):
    return sorted(data, key=sort_key)


def call_burn(library):
    # A tenth of a second of CPU per call: between calls the thread waits for
    # the GIL, which the sorting thread holds (2.7 hands it over rarely).
    return library.burn_cpu(100)


def burn_loop(library, deadline):
    while time.time() < deadline:
        call_burn(library)


def main():
    deadline = time.time() + float(sys.argv[1])
    library = ctypes.CDLL(sys.argv[2])
    library.burn_cpu.argtypes = [ctypes.c_int]
    library.burn_cpu.restype = ctypes.c_long
    burner = threading.Thread(target=burn_loop, args=(library, deadline))
    burner.daemon = True
    burner.start()
    data = list(range(5000))
    while time.time() < deadline:
        sort_caller(data)


main()
