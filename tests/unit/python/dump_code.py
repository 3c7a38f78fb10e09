# Dumps, for the code objects below, what python_code_reader_test checks the
# reader against, one tab-separated record a line (runs on 2.7 to 3.13):
#   CODE <id(code)> <co_name> <co_qualname or -> <co_filename> <co_firstlineno>
#        <line table hex> <offset=line,...>
#     the line table is co_lnotab (up to 3.9) or co_linetable (3.10+); the
#     offsets are instruction offsets as the BPF walk records them
#     (python_line_table.h) with the line CPython gives each ('-': none):
#     dis.findlinestarts up to 3.9, co_lines() on 3.10, co_positions() 3.11+.
#   SAMPLE <id(code)> <instruction offset> <f_lineno>
#     a running frame's own f_lasti and f_lineno, caught by sample().
# With the argument "wait" it then prints READY and sleeps, so that the test
# reads the code objects from its memory (id() is the address in CPython).
import dis
import sys
import time

VERSION = sys.version_info[:2]
SAMPLES = []


def sample():
    frame = sys._getframe(1)
    lasti = frame.f_lasti  # bytes on every version at the Python level
    if VERSION == (3, 10):
        lasti //= 2  # the C field counts code units
    SAMPLES.append((frame.f_code, lasti, frame.f_lineno))


def outer(n):
    def inner(x):
        sample()
        return x * 2
    sample()
    return inner(n)


class Shape(object):
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def area(self):
        sample()
        return (self.width *
                self.height +
                sample_value())

    class Inner(object):
        def method(self):
            sample()
            return 1


def sample_value():
    sample()
    return 0


def loop(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
            sample()
        else:
            total -= 1
    while total > 10:
        total //= 2
        sample()
    return total


def multi_line(a, b):
    value = [
        a,
        b,
        a + b,
    ]
    sample()
    return sum(
        value
    ) + len(
        value)


FUNCTIONS = [outer, Shape.__init__, Shape.area, Shape.Inner.method, sample_value, loop, multi_line]
if VERSION[0] >= 3:
    # Non-ASCII names (UCS1, UCS2, UCS4 strings), compiled from text so that
    # Python 2 can parse this file.
    SOURCE = ("\n" * 100) + (u"def gr\u00f6\u00dfe():\n    sample()\n    return 1\n"
                             u"def \u03c0_area():\n    sample()\n    return 2\n"
                             u"def \U0002000b():\n    sample()\n    return 3\n")
    NAMESPACE = {"sample": sample}
    exec(compile(SOURCE, __file__, "exec"), NAMESPACE)
    FUNCTIONS += [NAMESPACE[u"gr\u00f6\u00dfe"], NAMESPACE[u"\u03c0_area"], NAMESPACE[u"\U0002000b"]]


def code_of(function):
    return getattr(function, "__code__", None) or function.func_code


def all_codes(code, found):
    found.append(code)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            all_codes(const, found)
    return found


def expected_lines(code):
    pairs = []
    if VERSION <= (3, 9):
        starts = list(dis.findlinestarts(code))
        for offset in range(len(code.co_code)):
            line = None
            for start, start_line in starts:
                if start <= offset:
                    line = start_line
            pairs.append((offset, line))
    elif VERSION == (3, 10):
        for start, end, line in code.co_lines():
            for unit in range(start // 2, end // 2):
                pairs.append((unit, line))
    else:
        for index, position in enumerate(code.co_positions()):
            pairs.append((index * 2, position[0]))
    return pairs


def hex_of(data):
    return "".join("%02x" % b for b in bytearray(data))




def main():
    outer(3)
    Shape(2, 3).area()
    Shape.Inner().method()
    loop(20)
    multi_line(1, 2)
    if VERSION[0] >= 3:
        for function in FUNCTIONS[-3:]:
            function()
    codes = []
    for function in FUNCTIONS:
        all_codes(code_of(function), codes)
    out = []
    for code in codes:
        table = code.co_lnotab if VERSION <= (3, 9) else code.co_linetable
        lines = ",".join("%d=%s" % (offset, "-" if line is None else line)
                         for offset, line in expected_lines(code))
        out.append("\t".join(["CODE", str(id(code)), code.co_name, getattr(code, "co_qualname", "-"),
                              code.co_filename, str(code.co_firstlineno), hex_of(table), lines]))
    for code, lasti, line in SAMPLES:
        out.append("\t".join(["SAMPLE", str(id(code)), str(lasti), str(line)]))
    data = "\n".join(out) + "\n"
    if VERSION[0] >= 3:
        sys.stdout.buffer.write(data.encode("utf-8"))
    else:
        sys.stdout.write(data)
    sys.stdout.flush()
    if len(sys.argv) > 1 and sys.argv[1] == "wait":
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        time.sleep(120)


main()
