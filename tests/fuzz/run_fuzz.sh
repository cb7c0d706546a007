#!/usr/bin/env bash
# Fuzzes the trace reader and the analysis for a bounded time: records real seed traces with
# the build's own samples and tools (never committed), then runs trace_reader_fuzzer on them.
#
#   tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS [libFuzzer options...]
#
# BUILD_DIR is configured with CC=clang CXX=clang++ -DPROF_FUZZ=ON (tools/quickstart.sh fuzz
# does it). Work files go to $FUZZ_WORK (default BUILD_DIR/fuzz): seeds/ (remade every run),
# corpus/ (grows over runs) and artifacts/ (crash-*, timeout-*, oom-*, leak-* inputs). Exits
# non-zero when the fuzzer finds something; reproduce with `trace_reader_fuzzer FILE`.
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 BUILD_DIR SECONDS [libFuzzer options...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
seconds=$2
shift 2
fuzzer=$build/tests/fuzz/trace_reader_fuzzer
[[ -x $fuzzer ]] || { echo "run_fuzz: no $fuzzer (configure with -DPROF_FUZZ=ON and build)" >&2; exit 2; }
work=${FUZZ_WORK:-$build/fuzz}
seeds=$work/seeds
rm -rf "$seeds"
mkdir -p "$seeds" "$work/corpus" "$work/artifacts"

# ---- seed corpus: real traces, small chunks (the smallest the reader accepts) ------------------
# The programs run from a staged copy (bin/, lib/ as installed) that is deleted afterwards, so
# the modules the traces name do not exist: profreport would then read their ELF symbol tables,
# which is not fuzzed input and takes half of every run. FUZZ_KEEP_BINARIES=1 runs them in
# place instead (the symbol fallback with real files, at about half the speed).
stage=$work/stage
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib"
if [[ ${FUZZ_KEEP_BINARIES:-0} == 1 ]]; then
    bin() { case $1 in fuzz_seed_program) echo "$build/tests/fuzz/$1" ;; profrun) echo "$build/tools/$1" ;;
            *) echo "$build/samples/$1" ;; esac; }
else
    cp "$build/samples/fib" "$build/samples/threads" "$build/samples/lines" \
       "$build/tests/fuzz/fuzz_seed_program" "$build/tools/profrun" "$stage/bin/"
    cp -L "$build/libprof/libprof.so" "$stage/lib/libprof.so.0"
    cp "$build/libprof/libprofmem.so" "$stage/lib/"
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    bin() { echo "$stage/bin/$1"; }
fi
export PROF_CHUNK_SIZE=64K PROF_LOG=error
record() { # NAME COMMAND...: run COMMAND with PROF_OUT=seeds/NAME.trace
    local name=$1
    shift
    if ! PROF_OUT=$seeds/$name.trace "$@" >/dev/null 2>"$work/$name.log"; then
        echo "run_fuzz: seed $name failed (see $work/$name.log)" >&2
        rm -f "$seeds/$name.trace"
    fi
}
record fib "$(bin fib)" 12
record threads "$(bin threads)"
record lines "$(bin lines)"
record seed "$(bin fuzz_seed_program)"
# Calls counted in a call tree (format 1.9): CallNode, CallCounts, Position, samples at nodes.
record fib-counted env PROF_TIME=sampled "$(bin fib)" 22
record threads-counted env PROF_TIME=sampled "$(bin threads)"
# The memory profiler (LD_PRELOAD=libprofmem.so): allocations, stacks, RSS samples. It cannot
# run in a build where the programs themselves are built with ASan (PROF_SANITIZE).
memrun() { # NAME COMMAND...
    local name=$1
    shift
    if ! "$(bin profrun)" --mem --no-pack -q -f -o "$seeds/$name.trace" -- "$@" >/dev/null 2>"$work/$name.log"; then
        echo "run_fuzz: memory seed $name failed (see $work/$name.log); going on without it" >&2
        rm -f "$seeds/$name.trace"
    fi
}
memrun mem-seed "$(bin fuzz_seed_program)"
memrun mem-threads "$(bin threads)"
PROF_TIME=sampled memrun mem-counted "$(bin fuzz_seed_program)"
rm -rf "$stage"
unset LD_LIBRARY_PATH PROF_CHUNK_SIZE PROF_LOG
# Packed copies (profpack, format 2.1): zstd chunks and the packed memory records.
for name in mem-seed mem-threads seed threads-counted; do
    [[ -f $seeds/$name.trace ]] && "$build/tools/profpack" -q -o "$seeds/$name-packed.trace" \
        "$seeds/$name.trace" 2>>"$work/profpack.log"
done
# A trace cut short (a killed process): the reader reads it partially.
if [[ -f $seeds/seed.trace ]]; then
    size=$(stat -c %s "$seeds/seed.trace")
    head -c $((size / 2 + 1000)) "$seeds/seed.trace" >"$seeds/cut.trace"
fi
count=$(find "$seeds" -name '*.trace' | wc -l)
((count >= 3)) || { echo "run_fuzz: only $count seed traces; is the build complete?" >&2; exit 2; }
echo "run_fuzz: $count seed traces ($(du -sh "$seeds" | cut -f1)), fuzzing for ${seconds}s" >&2

# ---- fuzz ----------------------------------------------------------------------------------------
# New inputs go to corpus/ (the first directory); findings to artifacts/.
status=0
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds" >"$work/fuzz.log" 2>&1 || status=$?
tail -n 25 "$work/fuzz.log" >&2
if ((status != 0)); then
    echo "run_fuzz: FINDING (exit status $status); full log: $work/fuzz.log; inputs:" >&2
    ls -l "$work/artifacts" >&2
    exit 1
fi
echo "run_fuzz: no finding in ${seconds}s ($(ls "$work/corpus" | wc -l) corpus inputs)" >&2
