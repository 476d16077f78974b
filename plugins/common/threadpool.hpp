// threadpool.hpp: the persistent worker pool that a host-memory backend
// (cpu, blas) owns, plus the core count that sizes it by default.
//
// Lives in plugins/common, a static library linked into each plugin that
// uses it: every .so still carries its own copy and links nothing of
// Backplane. Created once per backend, joined when the backend is freed: no thread is
// created per op. run() hands one task to |nth| threads (the caller is
// thread 0), and returns when all of them finished: that is the barrier
// between two graph nodes. Not thread-safe: one caller at a time (a backend
// is used by one thread at a time by contract).
#ifndef BP_PLUGINS_COMMON_THREADPOOL_HPP_
#define BP_PLUGINS_COMMON_THREADPOOL_HPP_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace bp::plugins {

// Number of CPUs this process may run on (sched_getaffinity, else
// hardware_concurrency, else 1).
uint32_t count_cores();

class thread_pool {
 public:
  // A task body: part |ith| of |nth|. May throw; run() reports it.
  using task_fn = void (*)(void *ctx, int ith, int nth);

  // Starts |n_threads| - 1 workers (the caller is the last thread). Between
  // runs, threads spin |spin_iterations| times, then poll by sched_yield()
  // for up to kRestPollMicros, then sleep: worth it when each thread has a
  // core, harmful when the pool oversubscribes the CPU, so kAutoSpin means
  // kDefaultSpin when n_threads <= count_cores(), else 0 (no spin, no
  // yielding poll: straight to sleep).
  // Throws std::system_error if the OS refuses a thread (workers started so
  // far are joined).
  explicit thread_pool(int n_threads, int spin_iterations = kAutoSpin);

  // The default poll budget: 512 pauses, ~10-20 us. Longer polls were slower
  // on the 2-vCPU development VM (bp-run's small decoder: median 6-8 ms per
  // run with 4096, 3.6-3.9 ms with 512), where a hypervisor's pause-loop
  // exiting takes the vCPU away from a long spinner.
  static constexpr int kDefaultSpin = 512;
  static constexpr int kAutoSpin = -1;
  ~thread_pool();
  thread_pool(const thread_pool &) = delete;
  thread_pool &operator=(const thread_pool &) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(ctx, ith, nth) for ith in [0, nth), nth in [1, size()]. Returns
  // an empty string, or the message of the first exception a part threw.
  std::string run(int nth, task_fn fn, void *ctx);

  template <typename F>
  std::string run(int nth, F &body) {
    return run(
        nth, [](void *c, int ith, int n) { (*static_cast<F *>(c))(ith, n); }, &body);
  }

  // Ends the workers' spin: they go straight to the yielding poll that
  // follows every spin, then sleep. Call it at the end of a graph: with several
  // backends on the same cores ("blas;cpu"), an idle pool that spins steals
  // the cores the next backend computes on, while a worker that yields gives
  // them up at once and still catches the same backend's next graph without
  // a wake-up through the kernel (MUL_MAT 256^3 on 2 threads, ~170 us: 9-14%
  // faster than sleeping at once, bp-bench on the 2-vCPU development VM).
  // The next run() spins again.
  void rest() { resting_.store(true, std::memory_order_relaxed); }
  static constexpr int kRestPollMicros = 1000;
  static constexpr int kDonePollMicros = 50;

 private:
  void worker_main(int index);
  void run_part(int ith);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_cv_;  // workers wait for a new generation
  std::condition_variable done_cv_;  // the caller waits for pending_ == 0
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> resting_{false};  // set by rest(), cleared by run()
  const int spin_iterations_;
  bool stop_ = false;  // guarded by mutex_
  // The current task; written by the caller before the generation bump.
  task_fn fn_ = nullptr;
  void *ctx_ = nullptr;
  int nth_ = 1;
  std::mutex error_mutex_;
  std::string error_;
};

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_THREADPOOL_HPP_
