// scheduler.hpp: continuous batching. One thread owns the context; each
// step is one bp_model_context_eval_batch holding the next token of every
// slot that is decoding and a chunk of a prompt still being read, so a new
// request joins at the next step and a long prompt does not stall the
// others' tokens. Slot i is sequence i of the context.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backplane/model.h"
#include "job.hpp"

namespace bp::server {

struct scheduler_config {
  uint32_t parallel = 4;  // slots (the context's n_seq)
  size_t queue = 64;      // requests waiting for a slot at most
  uint32_t batch = 512;   // tokens per step (decode tokens + a prompt chunk)
  uint32_t slot_ctx = 0;  // positions each slot may hold (prompt + generated)
};

// Counters /metrics reads; written by the scheduler, read by any thread.
struct scheduler_stats {
  std::atomic<uint64_t> prompt_tokens{0};     // prompt tokens evaluated
  std::atomic<uint64_t> tokens_generated{0};  // tokens drawn
  std::atomic<uint64_t> steps{0};             // eval_batch calls
  std::atomic<uint64_t> cancelled{0};         // jobs ended by their client leaving
  std::atomic<uint64_t> busy_ns{0};           // time spent in steps
  std::atomic<uint32_t> cells_used{0};        // after the last step
  std::atomic<uint32_t> slots_busy{0};
};

class scheduler {
 public:
  scheduler(bp_model *model, bp_model_context *context, scheduler_config config);
  ~scheduler();  // stops the thread; queued and running jobs end with an error
  scheduler(const scheduler &) = delete;
  scheduler &operator=(const scheduler &) = delete;

  // Queues |j| for a slot; false when the queue is full (a 503).
  bool submit(std::shared_ptr<job> j);
  size_t queue_length() const;
  const scheduler_stats &stats() const { return stats_; }
  const scheduler_config &config() const { return config_; }

 private:
  struct slot {
    std::shared_ptr<job> j;       // null when free
    bp_generator *gen = nullptr;  // made once the prompt is evaluated
    size_t prompt_done = 0;       // prompt tokens evaluated so far
    bp_token next = -1;           // drawn, to evaluate in the next step
  };
  void loop();
  bool step();  // false when there was nothing to do
  void admit();
  void release(uint32_t seq);
  void deliver(uint32_t seq, const float *row);

  bp_model *model_;
  int32_t n_vocab_ = 0;
  bp_model_context *context_;
  const scheduler_config config_;
  std::vector<slot> slots_;
  scheduler_stats stats_;

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<job>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace bp::server
