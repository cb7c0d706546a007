// Every thread's call stack in a running process, now (profrun --pid PID --dump): py-spy
// dump's and gdb's `thread apply all bt` for native code, without frame pointers.
//
// A thread blocked in the kernel is never stopped: /proc/PID/task/TID/syscall gives its user
// stack and instruction pointers while it waits, and its stack is copied beside it
// (process_vm_readv), so a read, futex, nanosleep or epoll_wait goes on undisturbed: a stop
// would make some of them fail with EINTR. A thread on a CPU is stopped once, alone
// (PTRACE_SEIZE, PTRACE_INTERRUPT), for as long as it takes to copy its registers and stack,
// then detached; a system call the stop cut short with EINTR (a thread entering epoll_wait as
// it was interrupted) is set back to be made again. Nothing is injected, and when profrun
// dies the kernel detaches the thread, which runs on.
//
// The stacks are unwound with the binaries' .eh_frame (stack_unwinder.hpp) and the frame-
// pointer chain where those end, and named from the binaries on disk: symbols, DWARF lines
// and the functions inlined at each address (debug files found by build id or
// .gnu_debuglink); a frame in code without symbols is its module and offset.
#pragma once

#include "sampling/process_stacks.hpp"

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace prof::sampling {

using DumpFrame = NamedFrame;

struct DumpThread {
    pid_t tid = 0;
    std::string name;
    char state = '?';       // /proc's state letter: R, S, D, T, t, Z, ...
    long syscall = -1;      // the system call it is blocked in; -1: none
    // Stopped to read its registers: it was on a CPU, or waited where /proc's registers could
    // not unwind its stack.
    bool stopped = false;
    // From the interrupt to the detach: at most how long it was stopped (it includes the time
    // the thread took to reach the stop, when it had to be woken or scheduled first).
    uint64_t stop_ns = 0;
    uint64_t held_ns = 0; // from its stop's report to the detach: the part profrun held it
    bool syscall_restarted = false; // a system call the stop cut short was set to be made again
    std::vector<DumpFrame> frames; // innermost first
    std::string stack_end;  // why the stack ends before its first frame; empty: it does not
    std::string error;      // why there is no stack at all
};

struct ProcessDump {
    pid_t pid = 0;
    std::string exe, cmdline;
    std::vector<DumpThread> threads;
    uint64_t elapsed_ns = 0; // the whole dump, naming included
};

struct DumpOptions {
    size_t max_stack_bytes = 1 << 20; // of each thread's stack copied, from its stack pointer
    bool inlined = true;              // frames for the functions inlined at each address
};

// Dumps process `pid`. False with `error` set (one sentence) when the process cannot be read
// at all: gone, or ptrace refused. A thread that ends meanwhile is left out.
bool dump_process(pid_t pid, const DumpOptions& options, ProcessDump& out, std::string& error);

// "read", "futex", ...; "system call N" for a number this table lacks.
std::string syscall_name(long number);
// "running", "sleeping", "blocked" (uninterruptible), "stopped", ... for /proc's letter.
std::string state_name(char state);

} // namespace prof::sampling
