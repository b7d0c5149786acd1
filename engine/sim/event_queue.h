// event_queue.h — the simulator's event core: a queue of timed events, popped in time order, ties
// broken by the order they were scheduled, so a run is a pure function of its inputs and seed.
// Events carry a kind and two integer arguments (a node, a step, ...); strategies interpret them.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace sal::sim {

struct Event {
  double time = 0;
  uint64_t seq = 0;   // scheduling order: the tie-break
  int kind = 0;
  int64_t a = 0, b = 0;
};

class EventQueue {
 public:
  void schedule(double time, int kind, int64_t a = 0, int64_t b = 0) { heap_.push({time, next_seq_++, kind, a, b}); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.top(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    ++popped_;
    return e;
  }
  uint64_t popped() const { return popped_; }

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const { return x.time != y.time ? x.time > y.time : x.seq > y.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
  uint64_t popped_ = 0;
};

}  // namespace sal::sim
