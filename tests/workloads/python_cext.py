# Python whose time goes into C extensions: hashlib (OpenSSL's libcrypto, or
# the interpreter's own _sha256 module) and zlib (libz). Folding the
# interpreter's internals must keep those frames as the leaf.
#
#   python python_cext.py SECONDS [READY_FILE]
#
# READY_FILE is written once the loop starts: the test records from then on.
import hashlib
import sys
import time
import zlib


def digest_work(data):
    return hashlib.sha256(data).hexdigest()


def compress_work(data):
    return len(zlib.compress(data, 9))


deadline = time.time() + float(sys.argv[1])
# The pattern repeats every 251 bytes: built from one period, not a byte at
# a time (a million-step generator took seconds in an emulated guest).
period = bytes(bytearray((i * 7919) % 251 for i in range(251)))
piece = (period * ((1 << 16) // 251 + 1))[: 1 << 16]
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as ready:
        ready.write("ready\n")
while time.time() < deadline:
    # Equal time in each, whatever either costs on this interpreter.
    for work in (digest_work, compress_work):
        until = time.time() + 0.02
        while time.time() < until:
            work(piece)
