// lifetime.h — process lifetime rules shared by agents and workers: a child never outlives the
// process that started it.
#pragma once

#include <sys/types.h>

namespace sal {

// In a child: ask the kernel for SIGKILL when the parent dies (PR_SET_PDEATHSIG), and exit at once
// if the parent is already gone (it may have died before the prctl). expected_parent <= 0: no-op.
void die_with_parent(pid_t expected_parent);

// In a helper thread: blocks every asynchronous signal, so they reach the thread that handles
// them (the event loop) and never interrupt this one's blocking calls with EINTR.
void block_signals_in_this_thread();

// In a helper thread: lowers this thread's CPU priority to `nice` (on Linux a nice value is per
// thread), so that the event loop and the job's workers come first. Best effort.
void lower_this_thread_priority(int nice);

// The calling thread's kernel id (gettid).
pid_t this_thread_id();

// Moves thread `tid` (of this process, still running: an ended thread's id may be another's) into
// the idle class (SCHED_IDLE: it runs when a CPU has nothing else to do, and a thread that wakes
// takes the CPU from it at once, where a nice value only weighs its share), or back to the normal
// class at the nice value it had. The way back needs root (CAP_SYS_NICE) or an RLIMIT_NICE that
// allows that nice value: false where it is refused. Best effort.
bool run_in_idle_time(pid_t tid, bool idle);

}  // namespace sal
