// profreport latency: per function, the distribution of its calls' durations (p50 to max),
// its slowest calls, and what its slowest 1% spent their time in. Exact from a trace recorded
// with PROF_TIME=traced; from a default (counting) trace, for the call paths it timed (1.13).
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "analysis/model/latency.hpp"
#include "output.hpp"
#include "reading.hpp"
#include "render/latency.hpp"

#include <fmt/format.h>

namespace prof::profreport {

CLI::App* add_latency(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "latency", "[options] TRACE...",
        "Per-call latency: percentiles, slowest calls, and why the tail is slow.\n"
        "\n"
        "Per function: its calls, the mean, p50, p90, p99, p99.9 and max of each call's\n"
        "inclusive wall time, its slowest calls (when, in which thread, the call path), and\n"
        "for its slowest 1% of calls the share of their time each function it called held,\n"
        "against its other calls: where the tail's extra time went.\n"
        "\n"
        "A default recording (calls counted, times from samples) times the calls of the\n"
        "call paths whose calls last PROF_LATENCY_MIN (default 1 us) on average, into\n"
        "buckets: their percentiles are within 1/16 (6.25%), the mean and max exact, and\n"
        "the tail is the slowest call. For every call, exactly: PROF_TIME=traced\n"
        "(profrun --time traced).");
    declare_limit(*sub, a);
    value(
        *sub, "--detail", "N",
        [&a](const std::string& v) { a.latency.detail = size_t(parse_number("--detail", v)); },
        "show the slowest calls and the tail of the first N functions (default 3)");
    value(
        *sub, "--slowest", "N",
        [&a](const std::string& v) {
            a.latency.slowest = size_t(parse_number("--slowest", v));
            if (!a.latency.slowest || a.latency.slowest > 1000)
                refuse(fmt::format("--slowest expects 1 to 1000 calls, got '{}'", v));
        },
        "slowest calls kept per function (default 3)");
    declare_thread(*sub, a);
    declare_format(*sub, a, {"text", "json"});
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.command = run_latency;
        if (a.format == "csv") throw CLI::ValidationError("latency prints text or --format json");
    });
    return sub;
}

int run_latency(const Args& a, const tools::ToolLog& log) {
    namespace views = analysis::views;
    Output out(a.output);
    return guarded(out, log, [&] {
        views::LatencyOptions o;
        o.slowest = a.latency.slowest;
        if (a.thread) { // which stream of which trace it is, from a reading of the traces
            analysis::SessionOptions so = session_options(a);
            so.memory = false;
            analysis::Session threads(so);
            threads.add_traces(a.traces, 1);
            auto f = threads.find_thread(*a.thread);
            if (!f) {
                log.error(fmt::format("no thread with tid {} in the trace", *a.thread));
                return 1;
            }
            o.thread = *f;
        }
        ProgressLine progress;
        bool warned = false; // of partial traces: once, though they are read twice
        o.open = [&](analysis::ActivationObserver& observer) {
            analysis::SessionOptions so = session_options(a);
            so.progress = progress.callback();
            so.observer = &observer;
            so.observer_takes_counted = true; // their timed paths (format 1.13)
            so.observer_needs = "per-call latencies need";
            so.observer_hint = "record with PROF_TIME=traced: profrun --time traced";
            auto session = std::make_unique<analysis::Session>(so);
            session->add_traces(a.traces, 1);
            if (!warned) warn_partial(log, *session);
            warned = true;
            return session;
        };
        views::LatencyReport r;
        try {
            r = views::latency(o);
        } catch (const reader::TraceError& e) {
            log.error(e.what());
            return 1;
        }
        if (r.functions.empty() && r.counted) {
            log.error(
                "no call was timed: the trace counts calls without a clock per call, and "
                "times only the call paths whose calls last PROF_LATENCY_MIN (1 us by default) "
                "or more "
                "on average; none did, or the runtime timed none (PROF_LATENCY_MIN=0, or "
                "a runtime before format 1.13). Record with PROF_TIME=traced for every "
                "call's time");
            return 1;
        }
        render::LatencyPrint p;
        p.limit = a.table.limit;
        p.detail = a.latency.detail;
        p.format = a.format;
        p.source =
            a.traces.size() == 1 ? a.traces.front() : fmt::format("{} traces", a.traces.size());
        if (!out.open(log)) return 1;
        render::print_latency(out.file(), r, p);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
