// threading_test.cpp: the registry under concurrent use (FAILURES.md #19):
// first discovery from many threads at once, and loads/unloads racing with
// lookups and backend creation. Run under TSan for the full check
// (-DBP_SANITIZE=thread); here it must simply stay correct and not deadlock.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "registry_test_util.hpp"

using bp_test::fixture;
using bp_test::load_fixture;

namespace {

TEST(RegistryThreading, FirstDiscoveryFromManyThreadsRunsOnce) {
  EXPECT_EXIT(
      {
        std::atomic<bool> go{false};
        std::vector<size_t> counts(8);
        std::vector<std::thread> threads;
        for (size_t i = 0; i < counts.size(); ++i)
          threads.emplace_back([&, i] {
            while (!go.load()) std::this_thread::yield();
            counts[i] = bp_device_count();
          });
        go = true;
        for (auto &t : threads) t.join();
        for (size_t c : counts)
          if (c != counts[0]) std::exit(1);
        std::exit(bp_plugin_count() == bp_plugin_count() ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(RegistryThreading, LoadsUnloadsAndLookupsRace) {
  ASSERT_NE(load_fixture("good"), nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread loader([&] {
    for (int i = 0; i < 30; ++i) {
      bp_plugin *p = nullptr;
      if (bp_registry_load(fixture("abi_minor_new").c_str(), &p) != BP_OK) ++failures;
      // Another thread may hold a backend of it for a moment: retry.
      while (p && bp_plugin_unload(p) == BP_ERR_FAILED_PRECONDITION) std::this_thread::yield();
    }
    stop = true;
  });
  std::vector<std::thread> users;
  for (int t = 0; t < 3; ++t)
    users.emplace_back([&] {
      while (!stop.load()) {
        bp_backend *be = nullptr;
        if (bp_backend_init("good:flavor=1", &be) != BP_OK) ++failures;
        bp_backend_free(be);
        if (bp_device_count() == 0) ++failures;
        if (!bp_plugin_find("good")) ++failures;
        bp_backend *maybe = nullptr;  // the racing plugin may or may not be there
        if (bp_backend_init("abi_minor_new", &maybe) == BP_OK) bp_backend_free(maybe);
      }
    });
  loader.join();
  for (auto &u : users) u.join();
  EXPECT_EQ(failures.load(), 0) << bp_last_error();
}

}  // namespace
