#!/usr/bin/env bash
# Sets up a Debian 12 machine for libprof, builds it, and then either profiles a bundled sample
# (`demo`) or runs the whole test suite (`test`). Run as root (it installs packages with
# apt-get when some are missing); the README's quick start is these two commands.
# For CI (.ci/run) there are two more modes (cmake/sanitizers.cmake, tests/fuzz/):
#   sanitize [DIR]          the test suite under ASan+UBSan (DIR/asan), and the threaded and
#                           fork tests under TSan (DIR/tsan); default DIR: build-sanitize
#   fuzz [DIR] [SECONDS]    builds the trace reader's libFuzzer target with clang (default DIR:
#                           build-fuzz) and fuzzes it for SECONDS (default 60) from real traces
set -euo pipefail

usage() { echo "usage: $0 demo|test|sanitize [BUILD_DIR] | fuzz [BUILD_DIR] [SECONDS]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
mode=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case $mode in
sanitize) build=${2:-$root/build-sanitize} ;;
fuzz) build=${2:-$root/build-fuzz} ;;
*) build=${2:-$root/build} ;;
esac

packages=(g++ cmake ninja-build pkg-config python3 libfmt-dev doctest-dev
          libboost-stacktrace-dev libdw-dev libmimalloc-dev libzstd-dev libcli11-dev)
# The view tests check callgrind exports with callgrind_annotate (valgrind, a Perl script) and
# the HTML report in headless Chromium (with a font for its screenshot); the demo needs neither.
[[ $mode == test || $mode == sanitize ]] && packages+=(valgrind perl chromium fonts-dejavu-core)
# The MPI run tests: Debian's Open MPI (mpirun, and mpicxx to build the test's ranks).
[[ $mode == test ]] && packages+=(openmpi-bin libopenmpi-dev)
# The pprof export tests: go tool pprof. zlib: pprof files are gzipped.
[[ $mode == test || $mode == sanitize ]] && packages+=(golang-go)
# profrun --top is driven in tmux by its tests (send-keys, capture-pane).
[[ $mode == test || $mode == sanitize ]] && packages+=(tmux)
# The benchmarks' smoke runs (tools/bench/smoke.py) run every benchmark beside its peers: perf,
# uftrace and heaptrack (a peer that is missing makes its benchmark's smoke test report skipped).
[[ $mode == test ]] && packages+=(linux-perf uftrace heaptrack)
packages+=(zlib1g-dev)
# The fuzzer: Debian's clang and its runtimes (libFuzzer, ASan, UBSan). The packaging test
# builds its tail-call program with clang as well as the default compiler.
[[ $mode == fuzz ]] && packages+=(clang libclang-rt-14-dev)
[[ $mode == test ]] && packages+=(clang)

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

# The demo builds what it runs: the runtime, profrun, profreport and the sample (not the test
# suite's hundreds of targets), as a Release build at -O2 without debug information for the
# tools: -g costs a third of their compile time, and only the sample needs it (samples/ always
# builds with -g). `test` configures RelWithDebInfo again, with its own flags, and so rebuilds
# what the demo built (about 3 minutes of CPU): the first run of the demo is the one kept short.
build_demo() {
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" >/dev/null
    cmake --build "$build" -j "$(nproc)" --target profrun profreport vectorize
}

build_all() { # [CMAKE_OPTIONS...]
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROF_BUILD_TESTS=ON "$@" >/dev/null
    cmake --build "$build" -j "$(nproc)"
}

# Sanitizer builds use GCC (the reference compiler, which the test programs assume) at -O0:
# GCC 12 compiles -O2 code with ASan+UBSan three times slower, and -O0 catches the same errors.
sanitized() { # DIR SANITIZERS [TARGETS...]
    local dir=$1 sanitizers=$2
    shift 2
    CC=gcc CXX=g++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPROF_BUILD_TESTS=ON \
        -DPROF_SANITIZE="$sanitizers" >/dev/null
    cmake --build "$dir" -j "$(nproc)" ${1:+--target "$@"}
}

# The rows export test loads the rows into DuckDB: npm's @duckdb/node-api, in DIR/node.
install_duckdb() { # DIR
    [[ -d $1/node/node_modules/@duckdb/node-api ]] && return 0
    echo "quickstart: installing @duckdb/node-api (npm) into $1/node" >&2
    npm install --prefix "$1/node" --no-audit --no-fund --loglevel=error @duckdb/node-api@1.5.6-r.1 >/dev/null
}

# Node and npm for that test, from Debian where neither is installed (a Node.js of another
# source brings its own npm).
[[ ($mode == test || $mode == sanitize) ]] && ! command -v npm >/dev/null && packages+=(nodejs npm)
install_missing
case $mode in
demo)
    build_demo
    # The C++ counterpart of "Python loop vs NumPy": a call per element vs a vectorized kernel.
    # Up to 2^20 elements: the arrays' page faults are then 12% of the run under perf (31% up to
    # 2^22), so the profile's lesson is the calls'.
    out=$build/demo
    mkdir -p "$out"
    "$build/tools/profrun" -f -o "$out/vectorize.trace" -- "$build/samples/vectorize" 20
    echo
    "$build/tools/profreport" --sort cumtime --limit 10 "$out/vectorize.trace"
    ;;
test)
    build_all -DPROF_BUILD_BENCH=ON  # the benchmarks' programs, and their smoke test runs too
    install_duckdb "$build"
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
    ;;
sanitize)
    # ASan+UBSan: everything but the memory profiler's tests (skipped in the build: its
    # LD_PRELOAD malloc cannot coexist with ASan's) and the packaging test (it builds an outside
    # project without ASan against this instrumented libprof.so).
    sanitized "$build/asan" address,undefined
    install_duckdb "$build/asan"
    echo "quickstart: ASan+UBSan test suite (memory profiler and packaging tests skipped)" >&2
    ctest --test-dir "$build/asan" --output-on-failure -j "$(nproc)" --timeout 300 -E '^packaging:'
    # TSan: the tests that run several threads or fork. "timeline filters" is a view test (its
    # "thread" is --thread) whose fixed 5-12 ms window assumes main() starts within 5 ms of
    # the runtime; under TSan it starts ~60 ms later. (The deep-recursion test is not run either:
    # TSan's stack depot stops at 65536 frames and hangs.)
    sanitized "$build/tsan" thread prof_e2e_tests tests/programs/all samples/all
    echo "quickstart: TSan, threaded and fork tests" >&2
    ctest --test-dir "$build/tsan" --output-on-failure -j "$(nproc)" --timeout 300 -R 'thread|fork' \
        -E 'timeline filters'
    ;;
fuzz)
    CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DPROF_BUILD_TESTS=OFF -DPROF_FUZZ=ON >/dev/null
    cmake --build "$build" -j "$(nproc)" --target trace_reader_fuzzer
    "$root/tests/fuzz/run_fuzz.sh" "$build" "${3:-60}"
    ;;
*) usage ;;
esac
