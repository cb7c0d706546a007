#include "profrun/passed_signals.hpp"

#include <cerrno>
#include <csignal>

namespace prof::tools {

namespace {

volatile sig_atomic_t g_child = 0;
constexpr int kPassedOn[] = {SIGTERM, SIGHUP};

void pass_on(int sig, siginfo_t* info, void*) {
    int saved = errno;
    if (g_child > 0 && !(info && info->si_code == SI_KERNEL)) kill(pid_t(g_child), sig);
    errno = saved;
}

} // namespace

PassedOnSignals::PassedOnSignals() {
    sigemptyset(&passed_);
    for (int sig : kPassedOn) sigaddset(&passed_, sig);
    sigprocmask(SIG_BLOCK, &passed_, &before_);
}

void PassedOnSignals::in_child() {
    sigprocmask(SIG_SETMASK, &before_, nullptr);
}

void PassedOnSignals::started(pid_t child) {
    if (child > 0) {
        g_child = child;
        struct sigaction sa {};
        sa.sa_sigaction = pass_on;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        for (int sig : kPassedOn) sigaction(sig, &sa, nullptr);
    }
    sigprocmask(SIG_SETMASK, &before_, nullptr);
}

void PassedOnSignals::reaped() {
    sigprocmask(SIG_BLOCK, &passed_, nullptr);
    g_child = 0;
    for (int sig : kPassedOn) std::signal(sig, SIG_IGN);
    sigprocmask(SIG_SETMASK, &before_, nullptr);
}

} // namespace prof::tools
