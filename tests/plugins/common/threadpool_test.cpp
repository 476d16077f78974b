// threadpool_test.cpp: the plugins' persistent pool (plugins/common): every
// part runs exactly once per run, run() is a barrier, exceptions come back as
// messages, the pool survives thousands of back-to-back runs (the per-node
// pattern), and rest() stops idle polling.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "plugins/common/threadpool.hpp"

using bp::plugins::thread_pool;

TEST(PluginThreadPool, EveryPartRunsOncePerRun) {
  for (int n : {1, 2, 5}) {
    thread_pool pool(n);
    EXPECT_EQ(pool.size(), n);
    for (int nth = 1; nth <= n; ++nth) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      auto body = [&](int ith, int count) {
        EXPECT_EQ(count, nth);
        hits[static_cast<size_t>(ith)].fetch_add(1);
      };
      EXPECT_EQ(pool.run(nth, body), "");
      for (int i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), i < nth ? 1 : 0);
    }
  }
}

TEST(PluginThreadPool, RunIsABarrierOverManyRuns) {
  thread_pool pool(4, 0);  // no polling: the test machine may have fewer cores
  std::vector<int> data(4, 0);
  for (int step = 0; step < 1000; ++step) {
    // Each run reads what the previous run wrote in other threads' slots.
    auto body = [&](int ith, int nth) {
      int prev = data[static_cast<size_t>((ith + 1) % nth)];
      EXPECT_EQ(prev, step);
      (void)prev;
    };
    ASSERT_EQ(pool.run(4, body), "");
    auto bump = [&](int ith, int) { data[static_cast<size_t>(ith)] = step + 1; };
    ASSERT_EQ(pool.run(4, bump), "");
  }
}

TEST(PluginThreadPool, ExceptionsBecomeMessages) {
  thread_pool pool(3);
  auto throws = [](int ith, int) {
    if (ith == 2) throw std::runtime_error("part 2 failed");
  };
  EXPECT_EQ(pool.run(3, throws), "part 2 failed");
  auto fine = [](int, int) {};
  EXPECT_EQ(pool.run(3, fine), "");  // the pool is still usable
  auto throws_int = [](int, int) { throw 42; };
  EXPECT_NE(pool.run(1, throws_int), "");
}

TEST(PluginThreadPool, OversizedRequestsAreClamped) {
  thread_pool pool(2);
  std::atomic<int> parts{0};
  auto body = [&](int, int nth) {
    EXPECT_EQ(nth, 2);
    parts.fetch_add(1);
  };
  EXPECT_EQ(pool.run(64, body), "");
  EXPECT_EQ(parts.load(), 2);
  thread_pool zero(0);  // treated as one thread: the caller
  EXPECT_EQ(zero.size(), 1);
}

// rest() sends polling workers to sleep at once: with a spin budget of
// minutes, the process uses (almost) no CPU while the caller sleeps, and the
// next run() still works.
TEST(PluginThreadPool, RestStopsPollingWorkers) {
  auto cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  thread_pool pool(3, 1 << 30);
  std::atomic<int> parts{0};
  auto body = [&](int, int) { parts.fetch_add(1); };
  ASSERT_EQ(pool.run(3, body), "");
  pool.rest();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers reach their wait
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = cpu_seconds() - before;
  // Two polling workers would burn 0.3 s or more here.
  EXPECT_LT(used, 0.1) << "workers kept polling after rest()";
  ASSERT_EQ(pool.run(3, body), "");
  EXPECT_EQ(parts.load(), 6);
  pool.rest();
}
