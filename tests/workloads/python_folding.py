# What a profile reader sees of a Python program: self time on Python
# functions, names shown verbatim.
#
#   python python_folding.py burn SECONDS
#     spends its time in burn() (integer arithmetic: the interpreter's own C
#     code under one Python function), called from the module's top level.
#   python python_folding.py names SECONDS NAMES_FILE
#     spends its time, in equal parts, in functions whose names pprof readers
#     used to mangle: a lambda, a list comprehension, a generator expression,
#     a closure, called from <module>. Writes NAMES_FILE at start: one line per
#     function as the interpreter names it (co_qualname on 3.11+, else
#     co_name), the oracle for the profile's names.
from __future__ import print_function

import sys
import time


def burn(n):
    total = 0
    i = 0
    while i < n:
        total += (i * i) % 7
        i += 1
    return total


square = lambda n: sum([(i * i) % 7 for i in range(n)])


def comprehensions(n):
    listed = [(i * i) % 7 for i in range(n)]
    generated = sum((i * i) % 7 for i in range(n))
    return len(listed) + generated


class Engine(object):
    def finish(self, n):
        def closure():
            total = 0
            for i in range(n):
                total += (i * i) % 7
            return total
        return closure()


def code_name(code):
    return getattr(code, "co_qualname", code.co_name)


def record_names(path):
    names = [code_name(sys._getframe(1).f_code), code_name(square.__code__)]
    # The comprehensions' own code objects: constants of comprehensions()
    # (3.12+ inlines list comprehensions: no code object, no frame).
    for const in comprehensions.__code__.co_consts:
        if hasattr(const, "co_name"):
            names.append(code_name(const))
    for const in Engine.finish.__code__.co_consts:
        if hasattr(const, "co_name"):
            names.append(code_name(const))
    with open(path + ".tmp", "w") as out:
        for name in names:
            print(name, file=out)
    import os
    os.rename(path + ".tmp", path)


mode = sys.argv[1]
deadline = time.time() + float(sys.argv[2])
if mode == "names":
    record_names(sys.argv[3])
engine = Engine()
while time.time() < deadline:
    if mode == "burn":
        burn(400000)
    else:
        square(20000)
        comprehensions(10000)
        engine.finish(20000)
