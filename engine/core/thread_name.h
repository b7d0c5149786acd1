// thread_name.h — names the calling thread (15 characters at most), as `top -H`, perf and
// /proc/PID/task/TID/comm show it, so that an operator sees which of a process's threads takes the
// CPU: a worker's trainer and snapshot writer, an agent's slice endpoint.
#pragma once

#include <pthread.h>

namespace sal {

inline void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace sal
