// The process's Meta records at the start of its trace: what ran (the executable, its command
// line and directory, pid, host, MPI rank, run) and how it is recorded (the calibration's
// figures, the sampler, the calls' clock, the lines' clock). Written by the trace's start, the
// global lock held; a forked child writes them again into its own trace.
#include "thread_state.hpp"

#include <prof/trace_framing.hpp>
#include <prof/version.h>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace prof::rt {

namespace {

PROF_NOINSTR void write_meta_file(const char* key, const char* path, bool nul_to_space) {
    char buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return;
    while (n > 0 && buf[n - 1] == '\0') --n; // the last argument's terminator
    if (nul_to_space)
        for (ssize_t i = 0; i < n; ++i)
            if (buf[i] == '\0') buf[i] = ' ';
    meta_record(key, buf, size_t(n));
}

// An MPI rank (or a Slurm task): its number and the job's size, from the first of the
// launchers' variables that is set (Open MPI, MPICH/Intel MPI, PMIx, Slurm).
PROF_NOINSTR void write_rank_meta() {
    for (const auto& names : format::kRankVariables) {
        const char* rank = start_env(names[0]);
        if (!rank || !*rank || strspn(rank, "0123456789") != strlen(rank)) continue;
        meta_record("mpi_rank", rank, strlen(rank));
        meta_record("mpi_rank_from", names[0], strlen(names[0]));
        const char* size = start_env(names[1]);
        if (size && *size && strspn(size, "0123456789") == strlen(size))
            meta_record("mpi_size", size, strlen(size));
        return;
    }
}

} // namespace

// The calibration's figures ("in out line" ticks per event, calibration.cpp) as the Meta records
// overhead_in_ticks, overhead_out_ticks and line_overhead_ticks. False (nothing written) when
// they do not parse.
PROF_NOINSTR bool write_overhead_meta(const char* figures) {
    double in = 0, out = 0, line = 0;
    if (sscanf(figures, "%lf %lf %lf", &in, &out, &line) != 3) return false;
    const struct {
        const char* key;
        double ticks;
    } fields[] = {
        {"overhead_in_ticks", in}, {"overhead_out_ticks", out}, {"line_overhead_ticks", line}};
    for (const auto& f : fields) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.2f", f.ticks);
        meta_record(f.key, buf, strnlen(buf, sizeof buf));
    }
    return true;
}

PROF_NOINSTR void write_process_meta(const char* overhead) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) meta_record("exe", buf, size_t(n));
    write_meta_file("cmdline", "/proc/self/cmdline", true);
    write_meta_file("argv", "/proc/self/cmdline", false);
    if (getcwd(buf, sizeof buf)) meta_record("cwd", buf, strlen(buf));
    int len = snprintf(buf, sizeof buf, "%d", int(getpid()));
    meta_record("pid", buf, size_t(len));
    len = snprintf(buf, sizeof buf, "%d", int(getppid()));
    meta_record("ppid", buf, size_t(len));
    if (gethostname(buf, sizeof buf) == 0) meta_record("host", buf, strnlen(buf, sizeof buf));
    write_rank_meta();
    if (const char* run = start_env("PROF_RUN_ID"); run && *run)
        meta_record("run", run, strlen(run));
    meta_record("runtime", "libprof " PROF_VERSION_STRING,
                sizeof("libprof " PROF_VERSION_STRING) - 1);
    if (overhead[0]) write_overhead_meta(overhead); // a forked child: the parent's
    if (int sig = sampler_signal()) {               // CPU-time samples (Sample records, format 1.5)
        len = snprintf(buf, sizeof buf, "%d", sig);
        meta_record("sample_signal", buf, size_t(len));
        len = snprintf(buf, sizeof buf, "%u", g_options.sample_hz);
        meta_record("sample_hz", buf, size_t(len));
        meta_record("sample_clock", sampler_clock(), strlen(sampler_clock()));
    }
    // Calls counted without a clock (call_tree.cpp): from every thread's start, or once the
    // process has samples enough.
    if (switch_clock_on() && g_options.time_mode == kTimeSampled) {
        meta_record("time", "sampled", sizeof("sampled") - 1);
    } else if (switch_clock_on()) {
        meta_record("time", "auto", sizeof("auto") - 1);
        len = snprintf(buf, sizeof buf, "%u", g_options.count_after);
        meta_record("count_after_samples", buf, size_t(len));
    }
    if (switch_clock_on()) { // counted calls: which paths' calls are timed (format 1.13)
        len = snprintf(buf, sizeof buf, "%u", g_options.latency_min_ns);
        meta_record("latency_min_ns", buf, size_t(len));
    }
    if (prof_line_short_ticks) { // short lines' and scope runs' clock read at one in N
        len = snprintf(buf, sizeof buf, "%u", g_options.line_clock_every);
        meta_record("line_clock_every", buf, size_t(len));
    }
}

} // namespace prof::rt
