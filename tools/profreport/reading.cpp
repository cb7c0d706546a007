// Reading profreport's traces.
#include "reading.hpp"

#include "reader/trace_reader.hpp"
#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <thread>

namespace prof::profreport {

ProgressLine::ProgressLine() : tty_(isatty(2)) {}

ProgressLine::~ProgressLine() {
    if (shown_) std::fputs("\r\033[K", stderr);
}

analysis::ProgressFn ProgressLine::callback() {
    if (!tty_) return {};
    return [this](const analysis::Progress& p) {
        if (p.fraction < 0)
            std::fprintf(stderr, "\rprofreport: reading %s: %llu M events",
                         text::printable(*p.path).c_str(), (unsigned long long)(p.events >> 20));
        else
            std::fprintf(stderr, "\rprofreport: reading %s: %3.0f%%",
                         text::printable(*p.path).c_str(), 100 * p.fraction);
        shown_ = true;
    };
}

analysis::SessionOptions session_options(const Args& a) {
    analysis::SessionOptions o;
    o.compensate = !a.raw;
    o.time = a.time;
    o.clock = a.clock;
    o.inlined = !a.no_inline;
    return o;
}

Reading::Reading(const Args& a, const std::vector<std::string>& traces) {
    analysis::SessionOptions o = session_options(a);
    o.progress = progress.callback();
    session = std::make_unique<analysis::Session>(o);
    session->add_traces(traces, a.jobs);
}

std::vector<std::unique_ptr<analysis::Session>>
read_groups(const Args& a, const std::vector<std::vector<std::string>>& groups) {
    analysis::SessionOptions o = session_options(a);
    std::vector<std::unique_ptr<analysis::Session>> sessions(groups.size());
    std::vector<std::exception_ptr> errors(groups.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < groups.size();) {
            try {
                auto s = std::make_unique<analysis::Session>(o);
                s->add_traces(groups[i], 1);
                sessions[i] = std::move(s);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    unsigned jobs = a.jobs ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
    jobs = unsigned(std::min<size_t>(jobs, groups.size()));
    std::vector<std::thread> pool;
    for (unsigned j = 1; j < jobs; ++j) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    return sessions;
}

void warn_partial(const tools::ToolLog& log, const analysis::Session& session) {
    for (const std::string& w : render::partial_warnings(session.traces())) log.warn(w);
}

std::unique_ptr<Reading> read_traces(const Args& a, const tools::ToolLog& log) {
    try {
        return std::make_unique<Reading>(a, a.traces);
    } catch (const reader::TraceError& e) {
        log.error(e.what());
        return nullptr;
    }
}

int guarded(Output& out, const tools::ToolLog& log, const std::function<int()>& body) {
    try {
        return body();
    } catch (const std::system_error& e) {
        if (!out.report_write_error(log, e)) log.error(e.what());
        return 1;
    } catch (const std::exception& e) {
        out.discard();
        log.error(e.what());
        return 1;
    }
}

bool call_tree_options(const Args& a, const tools::ToolLog& log, analysis::Session& session,
                       analysis::views::CallTreeOptions& o) {
    o.split_threads = a.threads;
    if (a.thread) {
        auto f = session.find_thread(*a.thread);
        if (!f) {
            log.error(fmt::format("no thread with tid {} in the trace", *a.thread));
            return false;
        }
        o.thread = *f;
    }
    return true;
}

} // namespace prof::profreport
