#include "completion_thread.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace lockstep {
namespace jax {
namespace {

class CompletionThread {
 public:
  CompletionThread() {
    std::thread([this] { Loop(); }).detach();
  }

  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
};

}  // namespace

void PostCompletion(std::function<void()> task) {
  // Never destroyed: XLA may still complete programs while the process exits, and a
  // detached thread must not outlive the object it loops on.
  static CompletionThread* thread = new CompletionThread();
  thread->Post(std::move(task));
}

}  // namespace jax
}  // namespace lockstep
