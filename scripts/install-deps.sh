#!/usr/bin/env bash
# Installs every Debian package omniprof needs to build, test and benchmark.
# Idempotent: packages already present are not touched, and apt is only
# consulted when something is missing.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config clang llvm
  # BPF: libbpf for loading, bpftool for skeletons
  libbpf-dev bpftool
  # ELF and DWARF
  libelf-dev libdw-dev elfutils binutils zlib1g-dev
  # host libraries
  libboost-dev libboost-filesystem-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libprotobuf-dev protobuf-compiler libcli11-dev libxxhash-dev
  # export (host/export/): OTLP over gRPC (grpc_cpp_plugin generates the
  # service) and over HTTP, Pyroscope's ingest and /metrics (cpp-httplib)
  libgrpc++-dev protobuf-compiler-grpc libcpp-httplib-dev
  # runtimes the unwinder is checked against (clang and llvm above also
  # bring libLLVM-14 and libclang-cpp-14, the big executables of the e2e test)
  ruby python3 nodejs
  # CRuby embedded in a C program (the ruby plugin's e2e tests): ruby.h
  ruby-dev
  # tests and independent oracles
  libgtest-dev libgmock-dev golang-go linux-perf
  # the OTLP TLS tests make their certificate with it
  openssl
  # the flamegraph page's test and benchmark load it in headless Chromium
  # (fonts-liberation: a recommends of chromium, which --no-install-recommends
  # leaves out; without a font the page's text is drawn as boxes)
  chromium fonts-liberation
  # the Debian packages' checks (tests/packaging/): lintian, systemd-analyze
  # (cpack, dpkg and setpriv come with cmake, dpkg and util-linux)
  lintian systemd
  # promtool checks the /metrics page's format
  prometheus
  # the kernel matrix (scripts/kernel-matrix.sh): QEMU, a static busybox
  # initramfs packed with cpio, module decompressors
  qemu-system-x86 busybox-static cpio xz-utils zstd
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: must run as root to install packages (try: sudo $0)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A second CRuby build for the ruby plugin's tests (not installed: unpacked
# under /opt/omniprof/test-rubies).
"$(dirname "$0")/fetch-test-rubies.sh"

# Debian's own CPython builds (sid's 3.14 and 3.15, trixie's 3.13) for the
# python plugin's tests, beside pyenv's (not installed: unpacked under
# /opt/omniprof/test-pythons, a launcher each in its bin/).
"$(dirname "$0")/fetch-test-pythons.sh"
