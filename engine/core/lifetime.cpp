// lifetime.cpp — see lifetime.h.
#include "core/lifetime.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sal {

void die_with_parent(pid_t expected_parent) {
  if (expected_parent <= 0) return;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != expected_parent) _exit(1);
}

void block_signals_in_this_thread() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

void lower_this_thread_priority(int nice) {
  (void)setpriority(PRIO_PROCESS, id_t(this_thread_id()), nice);
}

pid_t this_thread_id() { return pid_t(syscall(SYS_gettid)); }

bool run_in_idle_time(pid_t tid, bool idle) {
  if (tid <= 0) return false;  // 0 would be the calling thread
  sched_param none{};
  return sched_setscheduler(tid, idle ? SCHED_IDLE : SCHED_OTHER, &none) == 0;
}

}  // namespace sal
