// The signals that end a wrapped program (a launcher such as mpirun ending its job, a service
// manager, `kill PID`), SIGTERM and SIGHUP, passed on by profrun to the program it started,
// so that the program ends as if started directly and profrun records how. Not the kernel's
// hangup (the terminal's: the program, in its process group, has it already); a signal sent
// to the whole process group reaches the program twice.
#pragma once

#include <csignal>
#include <sys/types.h>

namespace prof::tools {

class PassedOnSignals {
  public:
    PassedOnSignals();         // before fork: holds the signals until the child's pid is known
    void in_child();           // in the child, before exec: its signal mask as profrun's was
    void started(pid_t child); // in profrun: passes them on from now
    // The child is reaped (its pid may be another process's now): no more passing on, and the
    // signals are ignored until profrun exits, as it does soon (a launcher ending the job sends
    // its SIGTERM again while profrun writes the manifest).
    void reaped();

  private:
    sigset_t passed_, before_;
};

} // namespace prof::tools
