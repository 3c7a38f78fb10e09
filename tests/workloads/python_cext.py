# Python whose time goes into C extensions: hashlib (OpenSSL's libcrypto, or
# the interpreter's own _sha256 module) and zlib (libz). Folding the
# interpreter's internals must keep those frames as the leaf.
#
#   python python_cext.py SECONDS
import hashlib
import sys
import time
import zlib


def digest_work(data):
    return hashlib.sha256(data).hexdigest()


def compress_work(data):
    return len(zlib.compress(data, 9))


deadline = time.time() + float(sys.argv[1])
data = bytes(bytearray((i * 7919) % 251 for i in range(1 << 20)))
piece = data[: 1 << 16]
while time.time() < deadline:
    # Equal time in each, whatever either costs on this interpreter.
    for work in (digest_work, compress_work):
        until = time.time() + 0.02
        while time.time() < until:
            work(piece)
