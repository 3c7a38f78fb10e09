# Three threads, each with its own chain of Python functions:
#  - thread_one_work: pure Python, holds the GIL while it runs;
#  - thread_two_work: zlib.compress of a 4 MB buffer, which releases the GIL
#    while it compresses;
#  - thread_three_work: mostly asleep in time.sleep, on a CPU a fifth of
#    its time (2 ms of work between 10 ms sleeps): enough samples to judge.
# Writes "NAME TID" per thread to OUT_FILE once all three have started.
#
#   python python_threads.py SECONDS OUT_FILE
from __future__ import print_function

import ctypes
import os
import sys
import threading
import time
import zlib


def native_tid():
    if hasattr(threading, "get_native_id"):
        return threading.get_native_id()
    return ctypes.CDLL(None, use_errno=True).syscall(186)  # SYS_gettid on x86-64


def thread_one_work(deadline):
    total = 0
    while time.time() < deadline:
        i = 0
        while i < 100000:
            total += i & 7
            i += 1
    return total


def thread_one(deadline, tids, started):
    tids["thread_one_work"] = native_tid()
    started.release()
    thread_one_work(deadline)


def thread_two_work(deadline):
    # Compressible but not trivially: deflate does real work on every byte.
    chunk = b"".join(bytes(bytearray((i * 7 + j) & 0xff for j in range(64))) for i in range(256))
    data = chunk * 256
    size = 0
    while time.time() < deadline:
        size += len(zlib.compress(data, 6))
    return size


def thread_two(deadline, tids, started):
    tids["thread_two_work"] = native_tid()
    started.release()
    thread_two_work(deadline)


def thread_three_work(deadline):
    while time.time() < deadline:
        busy_until = time.time() + 0.002
        while time.time() < busy_until:
            pass
        time.sleep(0.01)


def thread_three(deadline, tids, started):
    tids["thread_three_work"] = native_tid()
    started.release()
    thread_three_work(deadline)


def main():
    deadline = time.time() + float(sys.argv[1])
    out_path = sys.argv[2]
    tids = {}
    started = threading.Semaphore(0)
    threads = [threading.Thread(target=t, args=(deadline, tids, started))
               for t in (thread_one, thread_two, thread_three)]
    for t in threads:
        t.daemon = True
        t.start()
    for _ in threads:
        started.acquire()
    with open(out_path + ".tmp", "w") as out:
        for name in sorted(tids):
            print(name, tids[name], file=out)
    os.rename(out_path + ".tmp", out_path)
    while time.time() < deadline:
        time.sleep(0.1)


main()
