#include "analysis/model/latency.hpp"

#include "reader/trace_reader.hpp"

#include <algorithm>
#include <cmath>
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
    bool run; // a scope run (several activations at once): not a call
    std::vector<std::pair<uint32_t, uint64_t>> callees; // pass 2: merged function -> ns
};

struct Slow {
    uint64_t duration, start;
    size_t thread;
    std::vector<uint32_t> path; // keys, outermost first
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

    void thread_started(size_t thread) override {
        if (stacks_.size() <= thread) stacks_.resize(thread + 1);
    }
    void opened(size_t thread, uint32_t function, uint64_t enter_ns, uint64_t count) override {
        uint32_t key = key_for(function);
        stacks_[thread].push_back(Frame{key, enter_ns, count > 1, {}});
    }
    void closed(size_t thread, uint64_t exit_ns) override {
        std::vector<Frame>& stack = stacks_[thread];
        Frame f = std::move(stack.back());
        stack.pop_back();
        if (f.run) return;
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
    void trace_done(size_t) override {
        ++trace;
        stacks_.clear();
    }

  private:
    std::vector<std::vector<Frame>> stacks_; // by thread

    uint32_t key_for(uint32_t function) {
        auto [it, fresh] = key_of.try_emplace({trace, function}, uint32_t(keys.size()));
        if (fresh) {
            keys.push_back({trace, function});
            durations.emplace_back();
            slowest.emplace_back();
        }
        return it->second;
    }
};

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

// The nearest-rank percentile of sorted durations.
uint64_t rank(const std::vector<uint64_t>& sorted, double q) {
    if (sorted.empty()) return 0;
    size_t r = size_t(std::ceil(q * double(sorted.size())));
    return sorted[std::clamp<size_t>(r, 1, sorted.size()) - 1];
}

} // namespace

LatencyReport latency(const LatencyOptions& o) {
    Collector c;
    c.keep_slowest = std::max<size_t>(o.slowest, 1);
    std::unique_ptr<Session> session = o.open(c);

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
    std::vector<std::vector<uint64_t>> durations(merged.size());
    std::vector<std::vector<Slow>> slow(merged.size());
    for (size_t k = 0; k < c.keys.size(); ++k) {
        auto& d = durations[c.merged_of[k]];
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
    std::vector<ThreadFilter> threads = session->thread_list();
    std::vector<ThreadSummary> thread_info;
    for (size_t t = 0; t < threads.size(); ++t) thread_info.push_back(session->thread(t));

    LatencyReport r;
    c.threshold.assign(merged.size(), UINT64_MAX);
    std::vector<size_t> row_of(merged.size(), SIZE_MAX); // merged function -> r.functions
    for (size_t m = 0; m < merged.size(); ++m) {
        std::vector<uint64_t>& d = durations[m];
        if (d.empty()) continue;
        row_of[m] = r.functions.size();
        std::sort(d.begin(), d.end());
        // The slowest 1% (at least one call): from the duration of the call of that rank.
        size_t tail = std::max<size_t>(1, (d.size() + 99) / 100);
        c.threshold[m] = d[d.size() - tail];
        FunctionLatency f;
        f.name = merged[m].name;
        f.file = merged[m].file.empty() ? base_name(merged[m].module) : base_name(merged[m].file);
        f.line = merged[m].line;
        f.calls = d.size();
        for (uint64_t v : d) {
            f.total_ns += v;
            size_t b = v ? size_t(63 - __builtin_clzll(v)) : 0;
            if (f.histogram.size() <= b) f.histogram.resize(b + 1, 0);
            ++f.histogram[b];
        }
        f.mean_ns = double(f.total_ns) / double(d.size());
        f.p50 = rank(d, 0.50);
        f.p90 = rank(d, 0.90);
        f.p99 = rank(d, 0.99);
        f.p999 = rank(d, 0.999);
        auto [low, high] = quantile_ranks(d.size(), 0.99);
        f.p99_low = d[low - 1];
        f.p99_high = high <= d.size() ? d[high - 1] : UINT64_MAX;
        f.max = d.back();
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
        r.calls += f.calls;
        r.functions.push_back(std::move(f));
        std::vector<uint64_t>().swap(d); // pass 2 needs only the thresholds
    }
    if (!o.tail) {
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
    session = o.open(c);
    for (size_t m = 0; m < merged.size(); ++m) {
        if (row_of[m] == SIZE_MAX) continue;
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
