#!/usr/bin/env bash
# Sets up a Debian 12 machine for libprof, builds it, and then either profiles a bundled sample
# (`demo`) or runs the whole test suite (`test`). Run as root (it installs packages with
# apt-get when some are missing); the README's quick start is these two commands.
set -euo pipefail

usage() { echo "usage: $0 demo|test [BUILD_DIR]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
mode=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${2:-$root/build}

packages=(g++ cmake ninja-build pkg-config python3 libfmt-dev doctest-dev
          libboost-stacktrace-dev libmimalloc-dev)
# The view tests check callgrind exports with callgrind_annotate (valgrind, a Perl script) and
# the HTML report in headless Chromium (with a font for its screenshot).
packages+=(valgrind perl chromium fonts-dejavu-core)

install_missing() {
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    echo "quickstart: installing ${missing[*]}" >&2
    if [[ $(id -u) -ne 0 ]]; then
        echo "quickstart: run as root (or install: ${missing[*]})" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build_all() {
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROF_BUILD_TESTS=ON >/dev/null
    cmake --build "$build" -j "$(nproc)"
}

install_missing
build_all
case $mode in
demo)
    # The C++ counterpart of "Python loop vs NumPy": a call per element vs a vectorized kernel.
    out=$build/demo
    mkdir -p "$out"
    "$build/tools/profrun" -f -o "$out/vectorize.trace" -- "$build/samples/vectorize" 18
    echo
    "$build/tools/profreport" --sort cumtime --limit 10 "$out/vectorize.trace"
    ;;
test)
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
    ;;
*) usage ;;
esac
