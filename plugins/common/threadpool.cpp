// threadpool.cpp: see threadpool.hpp. Workers spin briefly after each node
// (the next node usually follows within microseconds), then sleep on a
// condition variable so an idle backend costs no CPU; rest() turns the spin
// into a short yielding poll at the end of a graph.
#include "threadpool.hpp"

#include <sched.h>

#include <chrono>
#include <exception>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BP_CPU_RELAX() _mm_pause()
#else
#define BP_CPU_RELAX() ((void)0)
#endif

namespace bp::plugins {

uint32_t count_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<uint32_t>(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1u;
}

namespace {

// Calls sched_yield() until done() or |micros| have passed; true if done().
// A yielding thread keeps its vCPU awake without the PAUSE loop a
// hypervisor's pause-loop exiting punishes, and gives the core to any other
// runnable thread at once.
template <typename Done>
bool poll_yielding(Done done, int micros) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    sched_yield();
  }
  return true;
}

int resolve_spin(int n_threads, int spin_iterations) {
  if (spin_iterations == thread_pool::kAutoSpin)
    return n_threads <= static_cast<int>(count_cores()) ? thread_pool::kDefaultSpin : 0;
  return spin_iterations > 0 ? spin_iterations : 0;
}

}  // namespace

thread_pool::thread_pool(int n_threads, int spin_iterations)
    : spin_iterations_(resolve_spin(n_threads, spin_iterations)) {
  if (n_threads < 1) n_threads = 1;
  try {
    workers_.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back(&thread_pool::worker_main, this, i);
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_cv_.notify_all();
    for (auto &w : workers_) w.join();
    throw;
  }
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto &w : workers_) w.join();
}

void thread_pool::run_part(int ith) {
  try {
    fn_(ctx_, ith, nth_);
  } catch (const std::exception &e) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (error_.empty()) error_ = e.what()[0] ? e.what() : "exception in a cpu kernel";
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (error_.empty()) error_ = "unknown exception in a cpu kernel";
  }
}

std::string thread_pool::run(int nth, task_fn fn, void *ctx) {
  if (nth > size()) nth = size();
  if (nth < 1) nth = 1;
  error_.clear();
  fn_ = fn;
  ctx_ = ctx;
  nth_ = nth;
  resting_.store(false, std::memory_order_relaxed);
  if (nth > 1) {
    // Every worker acknowledges every generation, so the next run() cannot
    // change fn_/nth_ while a worker still reads them.
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_cv_.notify_all();
  }
  run_part(0);
  if (nth > 1) {
    int spins = 0;
    while (pending_.load(std::memory_order_acquire) != 0 && spins < spin_iterations_) {
      BP_CPU_RELAX();
      ++spins;
    }
    // Then a yielding poll before sleeping: a caller that sleeps here must
    // be woken through the kernel (tens of microseconds on a VM, whose idle
    // vCPU is halted), and returns so late that the worker, done spinning,
    // sleeps too and needs a wake-up for the next run: a 2-thread 256^3
    // product (~175 us) paid both on almost every run.
    const auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!all_done() && spin_iterations_ > 0) poll_yielding(all_done, kDonePollMicros);
    if (!all_done()) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, all_done);
    }
  }
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}

void thread_pool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < spin_iterations_ &&
           !resting_.load(std::memory_order_relaxed)) {
      BP_CPU_RELAX();
      ++spins;
    }
    if (spin_iterations_ > 0) {
      // After the spin, or at once after rest(): poll by yielding, so a
      // thread of another backend that wants this core gets it at once,
      // while the same backend's next node or graph (a decode loop) finds
      // the worker awake.
      poll_yielding([&] { return generation_.load(std::memory_order_acquire) != seen; }, kRestPollMicros);
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    if (index < nth_) run_part(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace bp::plugins
