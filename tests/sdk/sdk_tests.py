#!/usr/bin/env python3
"""The installed SDK, tested as a third party uses it (no kernel needed,
except that `omniprof plugins` loads BPF where it can).

  sdk_tests.py page        BUILD SOURCE   runs docs/writing-a-plugin.md's blocks
  sdk_tests.py plugin      BUILD SOURCE OUT  the page's plugin, built by a separate
                                          project that sees only an install prefix;
                                          its hello.so copied to OUT
  sdk_tests.py load        BUILD DIR NAME  `omniprof plugins` with only DIR's plugins
                                          lists NAME as loaded (its BPF in this kernel)
  sdk_tests.py perfmap     BUILD SOURCE OUT  sdk/examples/perfmap built the same way;
                                          its perfmap.so copied to OUT (for the e2e test)
  sdk_tests.py pkg-config  BUILD SOURCE   a program linking the helper library
                                          through `pkg-config --cflags --libs`
  sdk_tests.py headers     STD CC CXX SOURCE  each public header compiles alone
  sdk_tests.py mistyped-hook CXX SOURCE   a member named like a hook with another
                                          signature is a compile error naming it

Exit 77 (ctest: skipped) where the host cannot load BPF here and CI is not
set: then only the ABI checks ran, and a plugin shows as `checked`.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
PAGE = "docs/writing-a-plugin.md"


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(command, text=True, capture_output=True, **kwargs)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        fail(f"{command[0]} exited with {result.returncode}")
    return result.stdout


def temp_dir(name):
    # Under /tmp (root's, sticky): the host trusts a root-owned 0700 directory
    # there, so a plugin built inside it may be loaded.
    path = tempfile.mkdtemp(prefix=f"omniprof-sdk-{name}-", dir="/tmp")
    os.chmod(path, 0o755)
    return path


def install_sdk(build, prefix):
    """Installs only the SDK (COMPONENT dev): what a plugin author has."""
    run(["cmake", "--install", build, "--prefix", prefix, "--component", "dev"])


# ---- The page's blocks -------------------------------------------------------

FENCE = re.compile(r"^```(\S*)\s*$")
FILE_MARK = re.compile(r"^<!-- file: (\S+) -->\s*$")


def page_blocks(source):
    """[(kind, info, text)]: kind 'file' (info: its path) or 'sh'. A block of
    another kind must be `text` (sample output, not run): anything else is an
    error, so no block is left out silently."""
    blocks = []
    pending_file = None
    lines = open(os.path.join(source, PAGE)).read().splitlines()
    i = 0
    while i < len(lines):
        mark = FILE_MARK.match(lines[i])
        fence = FENCE.match(lines[i])
        if mark:
            pending_file = mark.group(1)
        elif fence:
            language = fence.group(1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                fail(f"{PAGE}: a block of '{language}' is not closed")
            text = "\n".join(body) + "\n"
            if pending_file:
                if os.path.isabs(pending_file) or ".." in pending_file.split("/"):
                    fail(f"{PAGE}: file {pending_file} is outside the page's directory")
                blocks.append(("file", pending_file, text))
            elif language == "sh":
                blocks.append(("sh", None, text))
            elif language == "text":
                blocks.append(("text", None, text))
            else:
                fail(f"{PAGE}: a '{language}' block with no file: comment (neither a file nor run)")
            pending_file = None
        elif lines[i].strip():
            pending_file = None if not lines[i].startswith("<!--") else pending_file
        i += 1
    return blocks


def write_page_files(blocks, directory):
    for kind, path, text in blocks:
        if kind == "file":
            target = os.path.join(directory, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w") as f:
                f.write(text)


def loaded_line(listing, name):
    """The line listing plugin `name` as loaded; None with BPF unusable here
    (then a skip, unless CI) after checking it passed the ABI checks."""
    loaded = re.search(rf"^loaded +{name} .*$", listing, re.M)
    if loaded:
        return loaded.group(0)
    if "BPF objects not loaded" in listing and os.environ.get("CI") != "true":
        if not re.search(rf"^checked +{name} ", listing, re.M):
            fail(f"{name} neither loaded nor checked:\n{listing}")
        print(f"SKIP: BPF unusable here; {name} passed the ABI checks only")
        sys.exit(SKIP)
    fail(f"{name} is not listed as loaded:\n{listing}")


def test_page(build, source):
    blocks = page_blocks(source)
    if not any(kind == "sh" for kind, _, _ in blocks) or not any(kind == "file" for kind, _, _ in blocks):
        fail(f"{PAGE}: no files or no commands found")
    work = temp_dir("page")
    write_page_files(blocks, work)
    script = "set -eux\n" + "".join(text for kind, _, text in blocks if kind == "sh")
    env = dict(os.environ, OMNIPROF_BUILD=build)
    env.pop("CMAKE_PREFIX_PATH", None)
    print(f"running the page's {sum(k == 'sh' for k, _, _ in blocks)} sh blocks in {work}", flush=True)
    listing = run(["bash", "-c", script], cwd=work, env=env)
    print(loaded_line(listing, "hello"))
    # The sample output's first line (the accepted versions) is the host's.
    for kind, _, text in blocks:
        if kind == "text" and text.startswith("host accepts"):
            first = text.splitlines()[0]
            if not re.search(rf"^{re.escape(first)}$", listing, re.M):
                fail(f"{PAGE} shows '{first}', the host printed:\n{listing}")
            break
    else:
        fail(f"{PAGE}: no sample output starting with 'host accepts'")
    shutil.rmtree(work)


# ---- The page's plugin against an install prefix only ------------------------

def build_against_prefix(build, source, project, work, prefix):
    """Configures and builds `project` (a copy outside the source tree) with
    only `prefix` to find omniprof in, and checks it saw nothing else: the
    package came from the prefix and no build rule names omniprof's source
    or build tree. Returns (binary dir, the package's directory)."""
    binary = os.path.join(work, "build")
    run(["cmake", "-S", project, "-B", binary, f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
        env={k: v for k, v in os.environ.items() if k != "CMAKE_PREFIX_PATH"})
    run(["cmake", "--build", binary])
    cache = open(os.path.join(binary, "CMakeCache.txt")).read()
    found = re.search(r"^omniprof-sdk_DIR:PATH=(.*)$", cache, re.M)
    if not found or not found.group(1).startswith(prefix + "/"):
        fail(f"omniprof-sdk was not found in {prefix}: {found.group(1) if found else 'no omniprof-sdk_DIR'}")
    for root, _, files in os.walk(binary):
        for name in files:
            if name.endswith((".make", ".txt", ".json", ".ninja", "Makefile")):
                text = open(os.path.join(root, name), errors="replace").read()
                for tree in (os.path.realpath(source), os.path.realpath(build)):
                    if tree + "/" in text:
                        fail(f"{os.path.join(root, name)} names {tree}: the build saw more than the prefix")
    return binary, found.group(1)


def check_exports_only_the_entry(plugin):
    symbols = run(["nm", "-D", "--defined-only", plugin]).split("\n")
    names = sorted(line.split()[-1] for line in symbols if line.strip())
    if names != ["omniprof_plugin_entry"]:
        fail(f"{plugin} exports {names}, expected exactly omniprof_plugin_entry")
    print(f"{plugin} exports only omniprof_plugin_entry")


def copy_plugin(plugin, output):
    """Puts `plugin` alone in `output` (root's, 0755: a directory the host
    trusts), for a later entry to load."""
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    os.chmod(output, 0o755)
    shutil.copy2(plugin, os.path.join(output, os.path.basename(plugin)))


def list_loaded(build, plugin_dir, name, work):
    """`omniprof plugins` with a configuration naming only `plugin_dir`:
    the line that lists `name` as loaded from there."""
    etc = os.path.join(work, "etc")
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "omniprof.yaml"), "w") as f:
        f.write(f"plugins:\n  directories: [{plugin_dir}]\n")
    listing = run([os.path.join(build, "bin", "omniprof"), "plugins"],
                  env=dict(os.environ, OMNIPROF_CONFIG_DIR=etc))
    line = loaded_line(listing, name)
    if os.path.join(plugin_dir, f"{name}.so") not in line:
        fail(f"{name} listed from elsewhere: {line}")
    return line


def test_load(build, plugin_dir, name):
    """The kernel's part of the plugin tests: its BPF object loaded (run in
    every guest of the kernel matrix, which does not compile)."""
    work = temp_dir("load")
    print(list_loaded(build, plugin_dir, name, work))
    shutil.rmtree(work)


def test_plugin(build, source, output):
    work = temp_dir("plugin")
    prefix = os.path.join(work, "prefix")
    install_sdk(build, prefix)
    # The plugin's sources outside the source tree, so nothing in it can be
    # reached by a relative path.
    project = os.path.join(work, "project")
    write_page_files(page_blocks(source), project)
    project = os.path.join(project, "hello")
    binary, package_dir = build_against_prefix(build, source, project, work, prefix)

    # The versions the package announces are its headers'.
    config = open(os.path.join(package_dir, "omniprof-sdkConfig.cmake")).read()
    header = open(os.path.join(prefix, "include", "omniprof", "plugin.h")).read()
    abi = open(os.path.join(prefix, "include", "omniprof", "bpf", "abi.h")).read()
    define = lambda text, name: re.search(rf"^#define {name} (\d+)$", text, re.M).group(1)
    expected = {"OMNIPROF_SDK_PLUGIN_ABI_VERSION": define(header, "OMNIPROF_PLUGIN_ABI_MAJOR") + "." +
                define(header, "OMNIPROF_PLUGIN_ABI_MINOR"),
                "OMNIPROF_SDK_BPF_ABI_VERSION": define(abi, "OMNIPROF_BPF_ABI_VERSION")}
    for name, value in expected.items():
        if not re.search(rf"^set\({name} {re.escape(value)}\)$", config, re.M):
            fail(f"omniprof-sdkConfig.cmake does not set {name} to {value}")

    plugin_dir = os.path.join(binary, "lib", "omniprof", "plugins")
    plugin = os.path.join(plugin_dir, "hello.so")
    check_exports_only_the_entry(plugin)
    print(list_loaded(build, plugin_dir, "hello", work))
    copy_plugin(plugin, output)
    print(f"hello.so built against {prefix} alone, in {output}")
    shutil.rmtree(work)


def test_perfmap(build, source, output):
    """The fourth plugin, sdk/examples/perfmap, built as a third party builds
    it: a copy of its folder against the installed SDK only. Its perfmap.so
    goes to `output`, the plugin directory the Node.js e2e test
    (tests/e2e/perfmap_test.cpp) loads it from."""
    work = temp_dir("perfmap")
    prefix = os.path.join(work, "prefix")
    install_sdk(build, prefix)
    project = os.path.join(work, "perfmap")
    shutil.copytree(os.path.join(source, "sdk", "examples", "perfmap"), project)
    binary, _ = build_against_prefix(build, source, project, work, prefix)
    plugin = os.path.join(binary, "lib", "omniprof", "plugins", "perfmap.so")
    check_exports_only_the_entry(plugin)
    copy_plugin(plugin, output)
    print(f"perfmap.so built against {prefix} alone, in {output}")
    shutil.rmtree(work)


# ---- pkg-config --------------------------------------------------------------

CONSUMER = r"""
#include <omniprof/plugin.h>
#include <omniprof/support/elf_file.h>
#include <omniprof/support/process_memory.h>

#include <unistd.h>

#include <cstdio>

int main() {
  auto elf = omniprof::ElfFile::open("/proc/self/exe");
  if (!elf) {
    std::fprintf(stderr, "%s\n", elf.error().message.c_str());
    return 1;
  }
  static const char marker[] = "read back";
  char copy[sizeof(marker)] = {};
  omniprof::ProcessMemory memory(getpid());
  auto read = memory.read_exact(reinterpret_cast<uint64_t>(marker), copy, sizeof(copy));
  if (!read) {
    std::fprintf(stderr, "%s\n", read.error().message.c_str());
    return 1;
  }
  std::printf("plugin ABI %d: %s, %zu load segments\n", OMNIPROF_PLUGIN_ABI_MAJOR, copy,
              elf->load_segments().size());
  return 0;
}
"""


def test_pkg_config(build, source, cxx):
    work = temp_dir("pkg-config")
    prefix = os.path.join(work, "prefix")
    install_sdk(build, prefix)
    pcs = [os.path.join(root, f) for root, _, files in os.walk(prefix) for f in files if f == "omniprof-sdk.pc"]
    if len(pcs) != 1:
        fail(f"expected one omniprof-sdk.pc under {prefix}, found {pcs}")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
    flags = run(["pkg-config", "--cflags", "--libs", "omniprof-sdk"], env=env).split()
    if os.path.join(prefix, "include") not in [os.path.normpath(f[2:]) for f in flags if f.startswith("-I")]:
        fail(f"pkg-config's Cflags do not name {prefix}/include: {flags}")
    # libbpf, for plugins' skeletons, only where a static link asks for all.
    if "-lbpf" in flags:
        fail(f"--libs names libbpf, which the helper library does not use: {flags}")
    if "-lbpf" not in run(["pkg-config", "--static", "--libs", "omniprof-sdk"], env=env).split():
        fail("--static --libs does not name libbpf (Requires.private)")
    source_file = os.path.join(work, "consumer.cpp")
    with open(source_file, "w") as f:
        f.write(CONSUMER)
    binary = os.path.join(work, "consumer")
    # The flags alone (no -I of our own), C++17: what a third party would do.
    run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", source_file, "-o", binary] + flags, env=env)
    out = run([binary])
    if "plugin ABI" not in out or "read back" not in out or ", 0 load segments" in out:
        fail(f"unexpected output: {out}")
    shutil.rmtree(work)


# ---- Headers -----------------------------------------------------------------

# Which public header is which. C: the plugin boundary and the BPF ABI user
# space includes (C11, C++17, C++20). BPF-only (*.bpf.h): compiled for the
# BPF target by every bpf_object() of the build (entry.bpf.c, the plugins'
# and the fixtures' .bpf.c), never by user space. The call-frame
# information reader (omniprof/support/cfi/) is C++20 (std::span). Every
# other header is a C++ helper (C++17 and C++20).
C_HEADERS = ["omniprof/plugin.h", "omniprof/bpf/abi.h"]
CXX20_ONLY_PREFIX = "omniprof/support/cfi/"


def public_headers(source):
    headers = []
    for include in ("sdk/include", "bpf/include"):
        root = os.path.join(source, include)
        for dirpath, _, files in os.walk(root):
            for name in files:
                if name.endswith((".h", ".hpp")):
                    headers.append((os.path.relpath(os.path.join(dirpath, name), root)))
    return sorted(headers)


def test_headers(standard, cc, cxx, source):
    headers = public_headers(source)
    missing = [h for h in C_HEADERS if h not in headers]
    if missing:
        fail(f"C headers not found: {missing}")
    bpf_only = [h for h in headers if h.endswith(".bpf.h")]
    if standard == "c11":
        checked, compiler, language = C_HEADERS, cc, "c"
    else:
        checked, compiler, language = [h for h in headers if h not in bpf_only], cxx, "c++"
        if standard == "c++17":
            checked = [h for h in checked if not h.startswith(CXX20_ONLY_PREFIX)]
    print(f"{standard}: {len(checked)} headers; BPF-only, not compiled here: {', '.join(bpf_only)}")
    if standard == "c++17":
        print(f"c++17: C++20-only, not compiled here: {CXX20_ONLY_PREFIX}*.h")
    flags = [f"-std={standard}", "-Wall", "-Wextra", "-Werror", "-pedantic-errors",
             "-I" + os.path.join(source, "sdk/include"), "-I" + os.path.join(source, "bpf/include")]
    failed = []
    for header in checked:
        result = subprocess.run([compiler, "-x", language, "-fsyntax-only"] + flags + ["-"],
                                input=f'#include "{header}"\n', text=True, capture_output=True)
        print(f"{'ok  ' if result.returncode == 0 else 'FAIL'} {header}")
        if result.returncode != 0:
            sys.stderr.write(result.stderr)
            failed.append(header)
    if failed:
        fail(f"{standard}: {', '.join(failed)} do not compile alone with -Wall -Wextra -Werror")


def test_mistyped_hook(cxx, source):
    plugin = os.path.join(source, "tests/sdk/mistyped_hook_plugin.cpp")
    flags = ["-std=c++17", "-fsyntax-only", "-I" + os.path.join(source, "sdk/include"),
             "-I" + os.path.join(source, "bpf/include")]
    # The control: with the hook's own signature the same file compiles.
    run([cxx] + flags + ["-DOMNIPROF_WELL_TYPED", plugin])
    result = subprocess.run([cxx] + flags + [plugin], text=True, capture_output=True)
    if result.returncode == 0:
        fail("a member `gone(const std::string&)` compiled: set_instance_hooks left process_gone out silently")
    expected = "Plugin::gone is named like the process_gone hook but does not have its signature"
    if expected not in result.stderr:
        sys.stderr.write(result.stderr)
        fail(f"the compiler refused the mistyped plugin, but not with \"{expected}\"")
    print(f"refused at compile time: {expected}")


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    command = argv[1]
    os.umask(0o022)
    if command == "page":
        test_page(*argv[2:4])
    elif command == "plugin":
        test_plugin(*argv[2:5])
    elif command == "load":
        test_load(*argv[2:5])
    elif command == "perfmap":
        test_perfmap(*argv[2:5])
    elif command == "pkg-config":
        test_pkg_config(*argv[2:5])
    elif command == "mistyped-hook":
        test_mistyped_hook(*argv[2:4])
    elif command == "headers":
        test_headers(*argv[2:6])
    else:
        fail(f"unknown command {command}\n{__doc__}")


if __name__ == "__main__":
    main(sys.argv)
