#include "analysis/model/latency.hpp"

#include "reader/trace_reader.hpp"

#include <prof/trace_format.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <queue>

namespace prof::analysis::views {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

// A function of one trace, as the observer names it.
struct TraceFunction {
    size_t trace;
    uint32_t function;
    bool operator<(const TraceFunction& o) const {
        return trace != o.trace ? trace < o.trace : function < o.function;
    }
};

struct Frame {
    uint32_t key; // index into the collector's keys (a function of a trace)
    uint64_t enter_ns;
    // A scope run (several activations at once), a frame inherited at a fork, or one open when
    // the thread began counting: no call's duration.
    bool no_duration;
    std::vector<std::pair<uint32_t, uint64_t>> callees; // pass 2: merged function -> ns
};

struct Slow {
    uint64_t duration, start;
    size_t thread;
    std::vector<uint32_t> path; // keys, outermost first
    size_t counted = SIZE_MAX;  // a counted path's longest call: its index in call_latencies
    bool operator>(const Slow& o) const { return duration > o.duration; }
};

// What both replays see: the activations of every thread, one trace after another.
class Collector : public ActivationObserver {
  public:
    std::vector<TraceFunction> keys;
    std::map<TraceFunction, uint32_t> key_of;
    std::vector<uint32_t> merged_of; // key -> merged function (pass 2)
    size_t trace = 0;
    bool second_pass = false;

    // Pass 1: every call's duration per key, and the slowest per key.
    std::vector<std::vector<uint64_t>> durations;
    std::vector<std::priority_queue<Slow, std::vector<Slow>, std::greater<Slow>>> slowest;
    size_t keep_slowest = 3;

    // Pass 2, per merged function: the tail's threshold, and the time of each callee in slow
    // calls and in the others.
    std::vector<uint64_t> threshold;
    struct Split {
        uint64_t slow_calls = 0, typical_calls = 0;
        uint64_t slow_ns = 0, typical_ns = 0;
        std::map<uint32_t, std::pair<uint64_t, uint64_t>> callees; // merged -> (slow, typical)
    };
    std::vector<Split> split;

    // The threads asked for (LatencyOptions::thread); the others' activations are not heard.
    ThreadFilter only;
    void thread_started(size_t thread, const ThreadFilter& which) override {
        if (stacks_.size() <= thread) stacks_.resize(thread + 1);
        if (ignored_.size() <= thread) ignored_.resize(thread + 1, false);
        ignored_[thread] =
            !only.all() && (which.trace != only.trace || which.stream != only.stream);
    }
    void opened(size_t thread, uint32_t function, uint64_t enter_ns, uint64_t count) override {
        if (ignored_[thread]) return;
        uint32_t key = key_for(function);
        // A scope run or an inherited frame is no call of its own: no duration.
        stacks_[thread].push_back(Frame{key, enter_ns, count != 1, {}});
    }
    void closed(size_t thread, uint64_t exit_ns) override {
        if (ignored_[thread]) return;
        std::vector<Frame>& stack = stacks_[thread];
        Frame f = std::move(stack.back());
        stack.pop_back();
        if (f.no_duration) return;
        uint64_t d = exit_ns > f.enter_ns ? exit_ns - f.enter_ns : 0;
        if (!second_pass) {
            if (durations.size() <= f.key) durations.resize(f.key + 1);
            durations[f.key].push_back(d);
            auto& q = slowest[f.key];
            if (q.size() < keep_slowest || d > q.top().duration) {
                Slow s{d, f.enter_ns, thread, {}};
                for (const Frame& up : stack) s.path.push_back(up.key);
                s.path.push_back(f.key);
                q.push(std::move(s));
                if (q.size() > keep_slowest) q.pop();
            }
            return;
        }
        // A function pass 1 did not see (a trace that grew between the replays) is left out.
        if (f.key >= merged_of.size() || merged_of[f.key] == kNone) return;
        uint32_t m = merged_of[f.key];
        Split& sp = split[m];
        bool slow = d >= threshold[m];
        (slow ? sp.slow_calls : sp.typical_calls) += 1;
        (slow ? sp.slow_ns : sp.typical_ns) += d;
        for (auto [callee, ns] : f.callees) {
            auto& c = sp.callees[callee];
            (slow ? c.first : c.second) += ns;
        }
        if (!stack.empty()) {
            auto& callees = stack.back().callees;
            auto it = std::find_if(callees.begin(), callees.end(),
                                   [m](const auto& c) { return c.first == m; });
            if (it == callees.end())
                callees.emplace_back(m, d);
            else
                it->second += d;
        }
    }
    // PROF_TIME=auto: the frames open when the thread began counting have no time of their
    // own (they close at its end): not calls of the distribution.
    void counting_began(size_t thread) override {
        if (ignored_[thread]) return;
        for (Frame& f : stacks_[thread]) f.no_duration = true;
    }
    void trace_done(size_t) override {
        ++trace;
        stacks_.clear();
    }

    uint32_t key_for(uint32_t function) { return key_for(trace, function); }
    uint32_t key_for(size_t in_trace, uint32_t function) {
        auto [it, fresh] = key_of.try_emplace({in_trace, function}, uint32_t(keys.size()));
        if (fresh) {
            keys.push_back({in_trace, function});
            durations.emplace_back();
            slowest.emplace_back();
        }
        return it->second;
    }

  private:
    std::vector<std::vector<Frame>> stacks_; // by thread
    std::vector<bool> ignored_;              // by thread: not LatencyOptions::thread
};

// A function's durations: exact ones (traced calls), and bucketed ones (counted calls timed into
// a CallLatency record's buckets), each a value standing for `calls` calls.
struct Durations {
    std::vector<uint64_t> exact;                         // sorted
    std::vector<std::pair<uint64_t, uint64_t>> bucketed; // (ns, calls), sorted
    uint64_t bucketed_calls = 0;

    uint64_t size() const { return exact.size() + bucketed_calls; }
    // The r-th smallest (1-based).
    uint64_t at(uint64_t r) const {
        if (bucketed.empty()) return exact[r - 1];
        size_t i = 0;
        uint64_t seen = 0;
        for (const auto& [ns, calls] : bucketed) {
            for (; i < exact.size() && exact[i] <= ns; ++i)
                if (++seen == r) return exact[i];
            if (seen + calls >= r) return ns;
            seen += calls;
        }
        return exact[i + (r - seen) - 1];
    }
};

// The value a duration of bucket `b` (of `n`) stands for: the middle of its bucket, in ns, no
// more than the path's longest call (which the last bucket stands for).
uint64_t bucket_ns(uint32_t b, size_t n, double ns_per_tick, double max_ns) {
    if (b + 1 >= format::kLatencyBuckets || b >= n) return uint64_t(max_ns);
    uint64_t low = format::latency_bucket_low(b), high = format::latency_bucket_low(b + 1);
    return uint64_t(std::min((double(low) + double(high - low) / 2) * ns_per_tick, max_ns));
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The ranks (1-based) of a 95% confidence interval of the q-quantile of n sorted values,
// distribution-free: the count of values below the quantile is Binomial(n, q), so the interval
// runs from the rank it exceeds with probability 2.5% to the one it stays under with 2.5%.
// `high` is n + 1 where n values cannot bound it from above (fewer than log 0.025 / log q: 367
// calls for the p99). Exact below 10^4 values, the normal approximation above.
std::pair<size_t, size_t> quantile_ranks(size_t n, double q) {
    if (n >= 10000) {
        double half = 1.96 * std::sqrt(double(n) * q * (1 - q));
        return {size_t(std::max(1.0, std::floor(double(n) * q - half))),
                size_t(std::min(double(n) + 1, std::ceil(double(n) * q + half) + 1))};
    }
    // P(X = k) for k = 0..n, in logs (q^n underflows).
    std::vector<double> logp(n + 1);
    double lq = std::log(q), lr = std::log1p(-q);
    for (size_t k = 0; k <= n; ++k)
        logp[k] = std::lgamma(double(n) + 1) - std::lgamma(double(k) + 1) -
                  std::lgamma(double(n - k) + 1) + double(k) * lq + double(n - k) * lr;
    // low: the largest r with P(X < r) <= 0.025 (rank r is below the quantile that often);
    // high: the smallest r with P(X < r) >= 0.975.
    size_t low = 1, high = n + 1;
    double below = 0; // P(X < r)
    for (size_t r = 1; r <= n + 1; ++r) {
        below += std::exp(logp[r - 1]);
        if (below <= 0.025) low = r;
        if (below >= 0.975) {
            high = r;
            break;
        }
    }
    return {std::min(low, n), high};
}

// The nearest-rank percentile.
uint64_t rank(const Durations& d, double q) {
    if (!d.size()) return 0;
    uint64_t r = uint64_t(std::ceil(q * double(d.size())));
    return d.at(std::clamp<uint64_t>(r, 1, d.size()));
}

std::string file_of(const Function& f) {
    return f.file.empty() ? base_name(f.module) : base_name(f.file);
}

// The tail of a function whose slowest call is counted path `slowest`'s longest: the callees
// (paths one deeper, in the same thread) whose own longest call lies inside it, with that call,
// against their other calls per other call of the function (when every call of both was timed).
void slowest_call_tail(FunctionLatency& f, const std::vector<CallPathLatency>& counted,
                       size_t slowest, const std::function<const Function&(size_t)>& function_of) {
    const CallPathLatency& p = counted[slowest];
    f.tail_from_slowest = true;
    f.tail_calls = 1;
    f.tail_threshold_ns = uint64_t(p.max_ns);
    double end = p.max_start_ns + p.max_ns;
    bool all_timed = p.calls == p.path_calls && p.calls > 1;
    double in_callees = 0, other_in_callees = 0;
    for (size_t i = 0; i < counted.size(); ++i) {
        const CallPathLatency& q = counted[i];
        if (q.thread != p.thread || q.trace != p.trace || q.path.size() != p.path.size() + 1 ||
            !std::equal(p.path.begin(), p.path.end(), q.path.begin()) || !q.calls ||
            q.max_start_ns < p.max_start_ns || q.max_start_ns + q.max_ns > end)
            continue;
        const Function& fn = function_of(i);
        TailCallee t;
        t.name = fn.name;
        t.file = file_of(fn);
        t.line = fn.line;
        t.slow_mean_ns = q.max_ns;
        t.slow_share = p.max_ns > 0 ? q.max_ns / p.max_ns : 0;
        in_callees += q.max_ns;
        if (all_timed && q.calls == q.path_calls) {
            t.typical_mean_ns = (q.sum_ns - q.max_ns) / double(p.calls - 1);
            t.typical_share =
                p.sum_ns > p.max_ns ? (q.sum_ns - q.max_ns) / (p.sum_ns - p.max_ns) : 0;
            other_in_callees += q.sum_ns - q.max_ns;
        }
        f.tail.push_back(std::move(t));
    }
    f.tail_self_share = p.max_ns > 0 ? std::max(0.0, 1 - in_callees / p.max_ns) : 0;
    f.typical_self_share = all_timed && p.sum_ns > p.max_ns
                               ? std::max(0.0, 1 - other_in_callees / (p.sum_ns - p.max_ns))
                               : 0;
    std::stable_sort(f.tail.begin(), f.tail.end(), [](const TailCallee& a, const TailCallee& b) {
        return a.slow_mean_ns > b.slow_mean_ns;
    });
}

} // namespace

LatencyReport latency(const LatencyOptions& o) {
    Collector c;
    c.keep_slowest = std::max<size_t>(o.slowest, 1);
    c.only = o.thread;
    std::unique_ptr<Session> opened = o.read ? nullptr : o.open(c);
    const Session* session = o.read ? o.read : opened.get();
    // Counted traces: the paths whose calls were timed, their functions as keys.
    std::vector<CallPathLatency> counted = session->call_latencies();
    if (!o.thread.all())
        counted.erase(
            std::remove_if(counted.begin(), counted.end(),
                           [&, threads = session->thread_list()](const CallPathLatency& l) {
                               const ThreadFilter& t = threads.at(l.thread);
                               return t.trace != o.thread.trace || t.stream != o.thread.stream;
                           }),
            counted.end());
    std::vector<std::vector<uint32_t>> counted_keys(counted.size());
    for (size_t i = 0; i < counted.size(); ++i)
        for (uint32_t fn : counted[i].path)
            counted_keys[i].push_back(c.key_for(counted[i].trace, fn));

    // Functions merged across traces by what names them, as the profile merges them.
    FunctionResolver resolver;
    std::map<std::pair<std::string, std::string>, uint32_t> merged_index;
    std::vector<Function> merged;
    c.merged_of.resize(c.keys.size(), kNone);
    for (size_t k = 0; k < c.keys.size(); ++k) {
        const TraceFunction& tf = c.keys[k];
        Function f = resolver.describe(session->trace_info(tf.trace),
                                       session->function_address(tf.trace, tf.function),
                                       session->function_module(tf.trace, tf.function));
        auto [it, fresh] = merged_index.try_emplace({f.name, f.file}, uint32_t(merged.size()));
        if (fresh) merged.push_back(f);
        c.merged_of[k] = it->second;
    }
    std::vector<Durations> durations(merged.size());
    std::vector<std::vector<Slow>> slow(merged.size());
    for (size_t k = 0; k < c.keys.size(); ++k) {
        auto& d = durations[c.merged_of[k]].exact;
        if (k < c.durations.size()) {
            if (d.empty())
                d = std::move(c.durations[k]); // most functions: one trace's
            else
                d.insert(d.end(), c.durations[k].begin(), c.durations[k].end());
            std::vector<uint64_t>().swap(c.durations[k]);
        }
        auto& q = c.slowest[k];
        for (; !q.empty(); q.pop()) slow[c.merged_of[k]].push_back(q.top());
    }
    std::vector<double> counted_ns(merged.size(), 0);
    for (size_t i = 0; i < counted.size(); ++i) {
        const CallPathLatency& p = counted[i];
        uint32_t m = c.merged_of[counted_keys[i].back()];
        Durations& d = durations[m];
        size_t top = p.buckets.size();
        while (top && !p.buckets[top - 1]) --top;
        for (uint32_t b = 0; b < top; ++b) {
            // One call of the highest bucket is the longest, known exactly.
            uint64_t n = p.buckets[b] - (b + 1 == top ? 1 : 0);
            if (n) d.bucketed.emplace_back(bucket_ns(b, top, p.ns_per_tick, p.max_ns), n);
            d.bucketed_calls += n;
        }
        if (top) {
            d.bucketed.emplace_back(uint64_t(p.max_ns), 1);
            ++d.bucketed_calls;
        }
        counted_ns[m] += p.sum_ns;
        if (p.calls)
            slow[m].push_back(
                Slow{uint64_t(p.max_ns), uint64_t(p.max_start_ns), p.thread, counted_keys[i], i});
    }
    // Every counted call of a function, timed or not (the profile's count less the traced
    // calls, which are all timed).
    std::map<std::pair<std::string, std::string>, uint64_t> profile_calls;
    if (!counted.empty())
        for (const Function& f : session->profile(o.thread).functions)
            profile_calls[{f.name, f.file}] += f.stats.ncalls;
    std::vector<ThreadFilter> threads = session->thread_list();
    std::vector<ThreadSummary> thread_info;
    for (size_t t = 0; t < threads.size(); ++t) thread_info.push_back(session->thread(t));

    LatencyReport r;
    r.counted = session->time_basis().untimed_traces > 0;
    for (size_t t = 0; t < session->traces().size() && !r.latency_min_ns; ++t) {
        auto m = session->trace_info(t).meta.find("latency_min_ns");
        if (m != session->trace_info(t).meta.end())
            r.latency_min_ns = std::strtoull(m->second.c_str(), nullptr, 10);
    }
    c.threshold.assign(merged.size(), UINT64_MAX);
    std::vector<size_t> row_of(merged.size(), SIZE_MAX); // merged function -> r.functions
    bool any_exact = false;
    for (size_t m = 0; m < merged.size(); ++m) {
        Durations& d = durations[m];
        if (!d.size()) continue;
        row_of[m] = r.functions.size();
        std::sort(d.exact.begin(), d.exact.end());
        std::sort(d.bucketed.begin(), d.bucketed.end());
        any_exact |= !d.exact.empty();
        // The slowest 1% (at least one call): from the duration of the call of that rank.
        uint64_t tail = std::max<uint64_t>(1, (d.size() + 99) / 100);
        c.threshold[m] = d.at(d.size() - tail + 1);
        FunctionLatency f;
        f.name = merged[m].name;
        f.file = merged[m].file.empty() ? base_name(merged[m].module) : base_name(merged[m].file);
        f.line = merged[m].line;
        f.calls = d.size();
        f.bound = d.bucketed.empty() ? 0.0 : 1.0 / 16;
        auto add_log2 = [&f](uint64_t v, uint64_t calls) {
            size_t b = v ? size_t(63 - __builtin_clzll(v)) : 0;
            if (f.histogram.size() <= b) f.histogram.resize(b + 1, 0);
            f.histogram[b] += calls;
        };
        for (uint64_t v : d.exact) {
            f.total_ns += v;
            add_log2(v, 1);
        }
        for (const auto& [v, calls] : d.bucketed) add_log2(v, calls);
        f.total_ns += uint64_t(counted_ns[m]);
        f.mean_ns = double(f.total_ns) / double(d.size());
        f.p50 = rank(d, 0.50);
        f.p90 = rank(d, 0.90);
        f.p99 = rank(d, 0.99);
        f.p999 = rank(d, 0.999);
        auto [low, high] = quantile_ranks(d.size(), 0.99);
        f.p99_low = d.at(low);
        f.p99_high = high <= d.size() ? d.at(high) : UINT64_MAX;
        f.max = d.exact.empty() ? 0 : d.exact.back();
        for (const Slow& s : slow[m]) f.max = std::max(f.max, s.duration);
        auto pc = profile_calls.find({merged[m].name, merged[m].file});
        if (pc != profile_calls.end() && pc->second > f.calls) f.untimed = pc->second - f.calls;
        f.tail_threshold_ns = c.threshold[m];
        std::sort(slow[m].begin(), slow[m].end(), std::greater<Slow>());
        if (slow[m].size() > c.keep_slowest) slow[m].resize(c.keep_slowest);
        for (const Slow& s : slow[m]) {
            SlowCall sc;
            sc.duration_ns = s.duration;
            sc.start_ns = s.start;
            if (s.thread < thread_info.size()) {
                sc.tid = thread_info[s.thread].tid;
                sc.thread = thread_info[s.thread].name;
            }
            for (uint32_t k : s.path) sc.path.push_back(merged[c.merged_of[k]].name);
            f.slowest.push_back(std::move(sc));
        }
        if (!d.bucketed.empty() && !slow[m].empty() && slow[m][0].counted != SIZE_MAX)
            slowest_call_tail(f, counted, slow[m][0].counted, [&](size_t i) -> const Function& {
                return merged[c.merged_of[counted_keys[i].back()]];
            });
        r.calls += f.calls;
        r.untimed += f.untimed;
        r.functions.push_back(std::move(f));
        std::vector<uint64_t>().swap(d.exact); // pass 2 needs only the thresholds
    }
    if (!o.tail || !any_exact || o.read) {
        std::stable_sort(r.functions.begin(), r.functions.end(),
                         [](const FunctionLatency& a, const FunctionLatency& b) {
                             return a.total_ns > b.total_ns;
                         });
        return r;
    }
    // Pass 2: what the tail's calls spent their time in.
    c.second_pass = true;
    c.trace = 0;
    c.split.assign(merged.size(), {});
    opened = o.open(c);
    for (size_t m = 0; m < merged.size(); ++m) {
        if (row_of[m] == SIZE_MAX || r.functions[row_of[m]].tail_from_slowest) continue;
        FunctionLatency& f = r.functions[row_of[m]];
        const Collector::Split& sp = c.split[m];
        f.tail_calls = sp.slow_calls;
        auto share = [](uint64_t part, uint64_t whole) {
            return whole ? double(part) / double(whole) : 0.0;
        };
        uint64_t slow_in_callees = 0, typical_in_callees = 0;
        for (const auto& [callee, ns] : sp.callees) {
            slow_in_callees += ns.first;
            typical_in_callees += ns.second;
            TailCallee t;
            t.name = merged[callee].name;
            t.file = merged[callee].file.empty() ? base_name(merged[callee].module)
                                                 : base_name(merged[callee].file);
            t.line = merged[callee].line;
            t.slow_share = share(ns.first, sp.slow_ns);
            t.typical_share = share(ns.second, sp.typical_ns);
            t.slow_mean_ns = sp.slow_calls ? double(ns.first) / double(sp.slow_calls) : 0;
            t.typical_mean_ns = sp.typical_calls ? double(ns.second) / double(sp.typical_calls) : 0;
            f.tail.push_back(std::move(t));
        }
        f.tail_self_share = share(sp.slow_ns - std::min(sp.slow_ns, slow_in_callees), sp.slow_ns);
        f.typical_self_share =
            share(sp.typical_ns - std::min(sp.typical_ns, typical_in_callees), sp.typical_ns);
        // The callees whose time grew most per call in the slow calls first: where the extra
        // time went.
        std::stable_sort(
            f.tail.begin(), f.tail.end(), [](const TailCallee& a, const TailCallee& b) {
                return a.slow_mean_ns - a.typical_mean_ns > b.slow_mean_ns - b.typical_mean_ns;
            });
    }
    std::stable_sort(
        r.functions.begin(), r.functions.end(),
        [](const FunctionLatency& a, const FunctionLatency& b) { return a.total_ns > b.total_ns; });
    return r;
}

} // namespace prof::analysis::views
