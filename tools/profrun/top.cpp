// profrun --top: see top.hpp. The counts are sampling/live_profile's; this draws them.
#include "profrun/top.hpp"

#include "sampling/live_profile.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <map>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

namespace prof::tools {
namespace {

using sampling::LiveCounts;
using sampling::LiveFunction;
using sampling::LiveProfile;

constexpr double kIntervalSeconds = 1.0;
constexpr size_t kSnapshotRows = 20;

double now_seconds() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double own_cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The terminal in the state the view needs (no echo, keys one by one, the alternate screen,
// no cursor), and back as it was, whatever ends the view.
class Terminal {
  public:
    bool enter() {
        if (tcgetattr(STDIN_FILENO, &saved_) != 0) return false;
        termios raw = saved_;
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0) return false;
        entered_ = true;
        write_all("\x1b[?1049h\x1b[?25l");
        return true;
    }
    ~Terminal() { leave(); }
    void leave() {
        if (!entered_) return;
        entered_ = false;
        write_all("\x1b[?25h\x1b[?1049l");
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    }
    // The keys pressed since the last call.
    std::string keys() {
        std::string k;
        char buf[64];
        ssize_t n;
        while ((n = read(STDIN_FILENO, buf, sizeof buf)) > 0) k.append(buf, size_t(n));
        return k;
    }
    static std::pair<int, int> size() {
        winsize w{};
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) != 0 || !w.ws_row || !w.ws_col) return {24, 80};
        return {w.ws_row, w.ws_col};
    }
    static void write_all(const std::string& s) {
        size_t done = 0;
        while (done < s.size()) {
            ssize_t n = write(STDOUT_FILENO, s.data() + done, s.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;
            done += size_t(n);
        }
    }

  private:
    termios saved_{};
    bool entered_ = false;
};

class TopView {
  public:
    TopView(LiveProfile& live, const TopOptions& o, bool terminal)
        : live_(live), total_sort_(o.sort == "total"), terminal_(terminal),
          rows_(o.rows ? o.rows : kSnapshotRows) {
        started_ = last_ = now_seconds();
        command_line_ = text::printable(sampling::command_line_of(live.pid()));
        cpu_at_last_ = own_cpu_seconds();
        for (const sampling::LiveThread& t : live_.threads()) cpu_before_[t.tid] = t.cpu_ns;
    }

    // Called after each read of the records: keys, and a new picture each interval. False
    // when the user quit.
    bool refresh(pid_t pid, Terminal* term) {
        bool redraw = false;
        if (term)
            for (char k : term->keys()) {
                if (k == 'q' || k == 'Q') {
                    ended_ = now_seconds();
                    return false;
                }
                if (k == 's') total_sort_ = false;
                if (k == 't') total_sort_ = true;
                if (k == 'i' || k == 'c') cumulative_ = !cumulative_;
                if (k == ' ' || k == 'p') paused_ = !paused_;
                redraw = true;
            }
        double now = now_seconds();
        if (now - last_ >= kIntervalSeconds) {
            // The interval that ended: its counts and the threads' CPU are what is drawn.
            shown_ = live_.interval();
            shown_seconds_ = now - last_;
            double cpu = own_cpu_seconds();
            own_share_ = (cpu - cpu_at_last_) / shown_seconds_;
            cpu_at_last_ = cpu;
            threads_.clear();
            for (const sampling::LiveThread& t : live_.threads()) {
                uint64_t before = cpu_before_.count(t.tid) ? cpu_before_[t.tid] : t.cpu_ns;
                threads_.push_back({t.name, double(t.cpu_ns - std::min(before, t.cpu_ns)) /
                                                1e9 / shown_seconds_});
                cpu_before_[t.tid] = t.cpu_ns;
            }
            std::stable_sort(threads_.begin(), threads_.end(),
                             [](const auto& a, const auto& b) { return a.second > b.second; });
            live_.next_interval();
            last_ = now;
            if (!terminal_) {
                print_snapshot(pid);
                return true;
            }
            redraw = redraw || !paused_;
        }
        if (terminal_ && redraw) draw(pid);
        return true;
    }

    // At the end, the table of the whole time watched, on standard output (a full screen's
    // is gone with it).
    void finish(pid_t pid) {
        std::string out;
        const LiveCounts& c = live_.cumulative();
        if (!ended_) ended_ = now_seconds();
        out += fmt::format("== process {}: since start, {:.1f} s: {} samples, {:.3f} s of CPU\n",
                           pid, ended_ - started_, c.samples, double(c.ns) / 1e9);
        for (const std::string& line : table(c, rows_, 0)) out += line + "\n";
        std::fputs(out.c_str(), stdout);
        std::fflush(stdout);
    }

  private:
    std::vector<const LiveFunction*> sorted(const LiveCounts& c) const {
        std::vector<const LiveFunction*> rows;
        for (const auto& [name, f] : c.functions) rows.push_back(&f);
        std::sort(rows.begin(), rows.end(), [&](const LiveFunction* a, const LiveFunction* b) {
            uint64_t ka = total_sort_ ? a->total_ns : a->self_ns;
            uint64_t kb = total_sort_ ? b->total_ns : b->self_ns;
            if (ka != kb) return ka > kb;
            return a->name < b->name;
        });
        return rows;
    }

    std::vector<std::string> table(const LiveCounts& c, size_t rows, size_t width) const {
        std::vector<std::string> out;
        out.push_back("  %Self  %Total    Self s   Total s  Function");
        double all = c.ns ? double(c.ns) : 1;
        for (const LiveFunction* f : sorted(c)) {
            if (out.size() > rows) break;
            std::string line = fmt::format(
                "{:7.1f} {:7.1f} {:9.3f} {:9.3f}  {}", 100.0 * double(f->self_ns) / all,
                100.0 * double(f->total_ns) / all, double(f->self_ns) / 1e9,
                double(f->total_ns) / 1e9, text::printable(f->name));
            // Where a function is from; a module's code is named by the module already.
            if (!f->where.empty() && f->name.front() != '[')
                line += " (" + text::printable(f->where) + ")";
            if (width && line.size() > width) line.resize(width);
            out.push_back(line);
        }
        if (c.functions.empty()) out.push_back("  (no samples: the process used no CPU)");
        return out;
    }

    std::string threads_line(size_t width) const {
        std::string s = fmt::format("threads: {}", threads_.size());
        size_t shown = 0;
        for (const auto& [name, share] : threads_) {
            std::string t = fmt::format("{} {} {:.0f}%", shown ? "," : "; CPU:",
                                        text::printable(name), 100 * share);
            if (width && s.size() + t.size() > width) break;
            s += t;
            ++shown;
        }
        return s;
    }

    void print_snapshot(pid_t pid) {
        std::time_t t = std::time(nullptr);
        char clock[16];
        std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&t));
        std::string out = fmt::format(
            "== {} process {} ({}): last {:.1f} s, {} samples, {:.3f} s of CPU; profrun {:.1f}% "
            "of a CPU\n{}\n",
            clock, pid, command_line_, shown_seconds_, shown_.samples, double(shown_.ns) / 1e9,
            100 * own_share_, threads_line(0));
        for (const std::string& line : table(shown_, rows_, 0)) out += line + "\n";
        out += "\n";
        std::fputs(out.c_str(), stdout);
        std::fflush(stdout);
    }

    void draw(pid_t pid) {
        auto [height, width] = Terminal::size();
        size_t w = size_t(width);
        const LiveCounts& c = cumulative_ ? live_.cumulative() : shown_;
        double seconds = cumulative_ ? now_seconds() - started_ : shown_seconds_;
        std::vector<std::string> lines;
        lines.push_back(fmt::format("profrun --top: process {} ({}){}", pid, command_line_,
                                    paused_ ? "   PAUSED" : ""));
        lines.push_back(fmt::format(
            "{}: {} samples, {:.3f} s of CPU in {:.1f} s; sorted by {}; lost {}; profrun {:.1f}% "
            "of a CPU",
            cumulative_ ? "since start" : "last interval", c.samples, double(c.ns) / 1e9, seconds,
            total_sort_ ? "total" : "self", live_.lost(), 100 * own_share_));
        lines.push_back(threads_line(w));
        lines.push_back("");
        size_t room = size_t(std::max(height - 6, 1));
        for (std::string& l : table(c, room, w)) lines.push_back(std::move(l));
        std::string screen = "\x1b[H";
        for (std::string& l : lines) {
            if (l.size() > w) l.resize(w);
            screen += l + "\x1b[K\n";
        }
        screen += "\x1b[J";
        screen += fmt::format("\x1b[{};1H", height);
        std::string keys = "s: sort by self  t: by total  i: interval/since start  space: pause  "
                           "q: quit";
        if (keys.size() > w) keys.resize(w);
        screen += "\x1b[7m" + keys + "\x1b[0m\x1b[K";
        Terminal::write_all(screen);
    }

    LiveProfile& live_;
    std::string command_line_; // read once: the process may be gone before the last table
    bool total_sort_, terminal_;
    size_t rows_;
    bool cumulative_ = false, paused_ = false;
    double started_ = 0, ended_ = 0, last_ = 0, cpu_at_last_ = 0, own_share_ = 0,
           shown_seconds_ = 1;
    LiveCounts shown_;
    std::vector<std::pair<std::string, double>> threads_;
    std::map<pid_t, uint64_t> cpu_before_;
};

} // namespace

int run_top(SampleOptions sampling, const TopOptions& o, const ToolLog& log) {
    pid_t watched = sampling.pid;
    bool terminal = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    Terminal term;
    std::unique_ptr<LiveProfile> live;
    std::unique_ptr<TopView> view;
    // The profile follows the process: attached, it is known now; launched, at its start.
    auto refresh = [&](pid_t pid) {
        watched = pid;
        if (!live) {
            live = std::make_unique<LiveProfile>(pid);
            if (terminal && !term.enter()) terminal = false;
            view = std::make_unique<TopView>(*live, o, terminal);
        }
        if (view->refresh(pid, terminal ? &term : nullptr)) return true;
        // Quit: the screen is given back at once, and a launched command runs on to its end.
        term.leave();
        if (!sampling.command.empty())
            log.info(fmt::format("stopped watching; waiting for {} (pid {}) to end",
                                 sampling.command[0], pid));
        return false;
    };
    struct Forward : sampling::RecordSink {
        std::unique_ptr<LiveProfile>* live;
        void on_sample(const sampling::Sample& s) override {
            if (*live) (*live)->on_sample(s);
        }
        void on_mapping(const sampling::Mapping& m) override {
            if (*live) (*live)->on_mapping(m);
        }
        void on_task(const sampling::TaskEvent&) override {}
        void on_comm(const sampling::CommEvent& c) override {
            if (*live) (*live)->on_comm(c);
        }
        void on_lost(uint64_t n) override {
            if (*live) (*live)->on_lost(n);
        }
    } forward;
    forward.live = &live;
    sampling.live = &forward;
    sampling.refresh = refresh;
    if (terminal) {
        sampling.quiet = true; // the screen is the view's
        // Its keys are the view's: a launched command reads no terminal (its output still
        // shares the screen).
        sampling.stdin_null = true;
    }
    int code = sampling.command.empty() ? attach_sampled(sampling, log) : run_sampled(sampling, log);
    term.leave();
    if (view) view->finish(watched);
    return code;
}

} // namespace prof::tools
