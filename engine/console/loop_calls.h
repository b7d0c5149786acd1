// loop_calls.h — calls from other threads into the controller's loop thread.
//
// The controller's state (membership, steps, plans, policy slots) belongs to its loop thread and is
// never locked. Code that runs elsewhere — a REPL chunk on its evaluation thread — reaches it by
// handing a closure to run() and waiting: the loop runs it between two of its own events (a uv_async
// wakes it) and the caller continues once it is done. Nothing else crosses: a closure reads and
// writes controller state on the loop thread only.
//
// close() (from the loop thread, when the controller stops) refuses new calls and releases every
// waiting one with false, so no evaluation thread waits for a loop that will not run again; what
// was posted is kept, and finish() runs it there and then (a chunk's last reply, after job.stop).
#pragma once

#include <uv.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace sal::console {

class LoopCalls {
 public:
  // Constructed on the loop thread.
  explicit LoopCalls(uv_loop_t* loop);
  ~LoopCalls();  // close()s
  LoopCalls(const LoopCalls&) = delete;
  LoopCalls& operator=(const LoopCalls&) = delete;

  // Runs fn on the loop thread and returns once it has run: true, or false when the loop is closing
  // and fn did not run. On the loop thread itself fn runs at once.
  bool run(const std::function<void()>& fn);
  // Queues fn to run on the loop thread soon (or at finish()).
  void post(std::function<void()> fn);

  // Refuses new calls and releases the waiting ones (their run() returns false). Loop thread.
  void close();
  // Runs what was posted and has not run yet. Loop thread (after the loop has stopped, too).
  void finish() { drain(); }

  bool on_loop_thread() const { return std::this_thread::get_id() == loop_thread_; }

 private:
  struct Call {
    const std::function<void()>* fn;
    bool done = false;
    bool ran = false;
  };
  void drain();  // the uv_async callback

  std::thread::id loop_thread_;
  uv_async_t* async_;  // freed by its close callback
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call*> queue_;
  std::deque<std::function<void()>> posted_;
  bool closed_ = false;
};

}  // namespace sal::console
