// loop_calls.cpp — see loop_calls.h.
#include "console/loop_calls.h"

namespace sal::console {

LoopCalls::LoopCalls(uv_loop_t* loop) : loop_thread_(std::this_thread::get_id()), async_(new uv_async_t) {
  uv_async_init(loop, async_, [](uv_async_t* h) {
    if (auto* self = static_cast<LoopCalls*>(h->data)) self->drain();
  });
  async_->data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));  // calls wake the loop; they do not keep it running
}

LoopCalls::~LoopCalls() {
  close();
  async_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(async_), [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
}

bool LoopCalls::run(const std::function<void()>& fn) {
  if (on_loop_thread()) {
    fn();
    return true;
  }
  Call call{&fn};
  std::unique_lock lock(mu_);
  if (closed_) return false;
  queue_.push_back(&call);
  uv_async_send(async_);
  cv_.wait(lock, [&] { return call.done; });
  return call.ran;
}

void LoopCalls::post(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  posted_.push_back(std::move(fn));
  if (!closed_) uv_async_send(async_);
}

void LoopCalls::drain() {
  for (;;) {
    Call* call = nullptr;
    std::function<void()> posted;
    {
      std::lock_guard lock(mu_);
      if (!queue_.empty()) {
        call = queue_.front();
        queue_.pop_front();
      } else if (!posted_.empty()) {
        posted = std::move(posted_.front());
        posted_.pop_front();
      } else {
        return;
      }
    }
    if (posted) {
      posted();
      continue;
    }
    (*call->fn)();  // the caller waits, so its closure and everything it refers to are alive
    std::lock_guard lock(mu_);
    call->done = call->ran = true;
    cv_.notify_all();
  }
}

void LoopCalls::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (Call* call : queue_) call->done = true;
  queue_.clear();
  cv_.notify_all();
}

}  // namespace sal::console
