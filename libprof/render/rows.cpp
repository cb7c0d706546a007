#include "render/rows.hpp"
#include "render/model.hpp"

#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace prof::render {

namespace {

// A cell: a string, a number, or null (CSV: empty).
struct Cell {
    enum Kind { kNull, kText, kNumber } kind = kNull;
    std::string value;
};
Cell text(const std::string& s) {
    return {Cell::kText, s};
}
Cell number(uint64_t v) {
    return {Cell::kNumber, std::to_string(v)};
}
Cell seconds(double v) {
    return {Cell::kNumber, fmt::format("{:.9f}", v)};
}
Cell null() {
    return {};
}

enum Column {
    kSchema,
    kKind,
    kRun,
    kHost,
    kRank,
    kPid,
    kPpid,
    kExe,
    kTrace,
    kTid,
    kThread,
    kFunction,
    kSymbol,
    kModule,
    kFile,
    kLine,
    kNcalls,
    kPrimitiveCalls,
    kTottime,
    kCumtime,
    kTimeSource,
    kSamples,
    kAllocCalls,
    kAllocBytes,
    kTemporary,
    kPeakBytes,
    kLeakedBytes,
    kLeakedBlocks,
    kStack,
    kColumns
};

class RowWriter {
  public:
    RowWriter(std::FILE* out, RowsFormat f) : out_(out), format_(f) {
        if (f == RowsFormat::kCsv) {
            const auto& names = rows_columns();
            for (size_t i = 0; i < names.size(); ++i)
                fmt::print(out_, "{}{}", i ? "," : "", names[i]);
            fmt::print(out_, "\n");
        }
    }
    void write(const std::vector<Cell>& row) {
        const auto& names = rows_columns();
        if (format_ == RowsFormat::kCsv) {
            for (size_t i = 0; i < row.size(); ++i) {
                if (i) std::fputc(',', out_);
                if (row[i].kind == Cell::kText)
                    std::fputs(text::csv_escape(row[i].value).c_str(), out_);
                else if (row[i].kind == Cell::kNumber)
                    std::fputs(row[i].value.c_str(), out_);
            }
        } else {
            std::fputc('{', out_);
            for (size_t i = 0; i < row.size(); ++i) {
                fmt::print(out_, "{}\"{}\": ", i ? ", " : "", names[i]);
                if (row[i].kind == Cell::kText)
                    fmt::print(out_, "\"{}\"", text::json_escape(row[i].value));
                else if (row[i].kind == Cell::kNumber)
                    std::fputs(row[i].value.c_str(), out_);
                else
                    std::fputs("null", out_);
            }
            std::fputc('}', out_);
        }
        std::fputc('\n', out_);
    }

  private:
    std::FILE* out_;
    RowsFormat format_;
};

std::vector<Cell> process_cells(const RowsProcess& p, const char* kind) {
    std::vector<Cell> row(kColumns);
    row[kSchema] = number(kRowsSchema);
    row[kKind] = text(kind);
    row[kRun] = p.run.empty() ? null() : text(p.run);
    row[kHost] = text(p.host);
    row[kRank] = p.rank ? number(*p.rank) : null();
    row[kPid] = number(p.pid);
    row[kPpid] = number(p.ppid);
    row[kExe] = text(p.exe);
    row[kTrace] = text(p.trace);
    return row;
}

void function_rows(RowWriter& w, const RowsProcess& p, const Profile& profile,
                   const ThreadSummary* thread) {
    const bool counted = profile.time.calls_counted();
    const bool sampled = profile.time.sampled_traces > 0;
    for (const Function& f : profile.functions) {
        std::vector<Cell> row = process_cells(p, thread ? "thread_function" : "function");
        if (thread) {
            row[kTid] = number(thread->tid);
            row[kThread] = text(thread->name);
        }
        row[kFunction] = text(f.name);
        row[kSymbol] = f.symbol.empty() ? null() : text(f.symbol);
        row[kModule] = text(f.module);
        row[kFile] = f.file.empty() ? null() : text(f.file);
        row[kLine] = f.line ? number(f.line) : null();
        row[kNcalls] = counted ? number(f.stats.ncalls) : null();
        row[kPrimitiveCalls] = counted ? number(f.stats.pcalls) : null();
        row[kTottime] = seconds(f.stats.tottime);
        row[kCumtime] = seconds(f.stats.cumtime);
        row[kTimeSource] = text(sampled ? "samples" : "hooks");
        row[kSamples] = sampled ? number(profile.time.samples) : null();
        w.write(row);
    }
}

void memory_rows(RowWriter& w, const RowsProcess& p) {
    for (const MemorySite& s : p.memory->sites) {
        std::vector<Cell> row = process_cells(p, "memory_site");
        if (!s.stack.empty()) {
            const MemoryFrame& top = s.stack.front();
            row[kFunction] = text(top.name);
            row[kModule] = top.module.empty() ? null() : text(top.module);
            row[kFile] = top.file.empty() ? null() : text(top.file);
            row[kLine] = top.line ? number(top.line) : null();
        }
        std::string stack; // outermost first, as folded stacks
        for (size_t i = s.stack.size(); i-- > 0;) stack += s.stack[i].name + (i ? ";" : "");
        row[kAllocCalls] = number(s.allocations);
        row[kAllocBytes] = number(s.bytes);
        row[kTemporary] = number(s.temporary);
        row[kPeakBytes] = number(s.peak_bytes);
        row[kLeakedBytes] = number(s.leaked_bytes);
        row[kLeakedBlocks] = number(s.leaked_blocks);
        row[kStack] = text(stack);
        w.write(row);
    }
}

} // namespace

const std::vector<std::string>& rows_columns() {
    static const std::vector<std::string> names = {"schema",
                                                   "kind",
                                                   "run",
                                                   "host",
                                                   "rank",
                                                   "pid",
                                                   "ppid",
                                                   "exe",
                                                   "trace",
                                                   "tid",
                                                   "thread",
                                                   "function",
                                                   "symbol",
                                                   "module",
                                                   "file",
                                                   "line",
                                                   "ncalls",
                                                   "primitive_calls",
                                                   "tottime",
                                                   "cumtime",
                                                   "time_source",
                                                   "samples",
                                                   "alloc_calls",
                                                   "alloc_bytes",
                                                   "temporary_allocs",
                                                   "peak_bytes",
                                                   "leaked_bytes",
                                                   "leaked_blocks",
                                                   "stack"};
    return names;
}

void write_rows(std::FILE* out, const std::vector<RowsProcess>& processes, RowsFormat format) {
    if (rows_columns().size() != size_t(kColumns)) throw std::logic_error("rows: columns");
    RowWriter w(out, format);
    for (const RowsProcess& p : processes) {
        function_rows(w, p, *p.profile, nullptr);
        for (const Profile* t : p.threads)
            if (!t->threads.empty()) function_rows(w, p, *t, &t->threads.front());
        if (p.memory && p.memory->present) memory_rows(w, p);
    }
}

} // namespace prof::render
