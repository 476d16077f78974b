// threading_test.cpp: the registry under concurrent use (docs/failures.md #19):
// first discovery from many threads at once, loads/unloads racing with
// lookups and backend creation, the same files loaded from many threads, and
// registry calls from inside a plugin's init (a log callback). Run under
// TSan for the full check (build-tsan-reg, -DBP_SANITIZE=thread); here it
// must simply stay correct and not deadlock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "registry_test_util.hpp"
#include "support/find.hpp"

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
        if (bp_backend_new("good:flavor=1", &be) != BP_OK) ++failures;
        bp_backend_free(be);
        if (bp_device_count() == 0) ++failures;
        if (!bp_test::find_plugin("good")) ++failures;
        bp_backend *maybe = nullptr;  // the racing plugin may or may not be there
        if (bp_backend_new("abi_minor_new", &maybe) == BP_OK) bp_backend_free(maybe);
      }
    });
  loader.join();
  for (auto &u : users) u.join();
  EXPECT_EQ(failures.load(), 0) << bp_last_error();
}

TEST(RegistryThreading, SameFilesLoadedFromManyThreadsLoadOnce) {
  // Every thread gets the same plugin for a file, a refused file has one
  // entry, and of two files sharing a name the one loaded first wins (each
  // thread loads dup_name_a before dup_name_b).
  const std::vector<std::string> files = {"good", "fake_gpu", "zero_devices", "not_elf", "init_fails",
                                          "dup_name_a", "dup_name_b", "abi_major_new"};
  constexpr int k_threads = 6;
  std::vector<std::map<std::string, std::pair<bp_status, bp_plugin *>>> seen(k_threads);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (const std::string &f : files) {
        bp_plugin *p = nullptr;
        bp_status st = bp_registry_load(fixture(f).c_str(), &p);
        seen[t][f] = {st, p};
        bp_device_count();
        bp_rejected_count();
      }
    });
  go = true;
  for (auto &t : threads) t.join();
  for (const std::string &f : files) {
    SCOPED_TRACE(f);
    for (int t = 1; t < k_threads; ++t) EXPECT_EQ(seen[t][f], seen[0][f]) << "thread " << t;
  }
  EXPECT_EQ(seen[0]["dup_name_a"].first, BP_OK);
  EXPECT_EQ(seen[0]["dup_name_b"].first, BP_ERR_ALREADY_EXISTS);
  EXPECT_EQ(seen[0]["not_elf"].first, BP_ERR_INCOMPATIBLE);
  size_t entries = 0;
  for (size_t i = 0, n = bp_rejected_count(); i < n; ++i) {
    const char *path = nullptr;
    ASSERT_EQ(bp_rejected_get(i, &path, nullptr, nullptr), BP_OK);
    entries += std::string(path) == fixture("not_elf");
  }
  EXPECT_EQ(entries, 1u);
}

// What a log callback saw when it called the registry from inside a load.
struct reentry {
  int calls = 0;
  bp_status load = BP_OK, discover = BP_OK, unload = BP_OK, shutdown = BP_OK;
  size_t devices = 0;
  bool found_good = false;
};

void reenter(bp_log_level, const char *source, const char *message, void *user) {
  auto *r = static_cast<reentry *>(user);
  if (std::string(source) != "zero_devices" || std::string(message) != "fake: init") return;
  ++r->calls;
  // Reading is fine (the list lock is not held while plugin code runs);
  // anything that would load or unload must refuse instead of deadlocking.
  r->devices = bp_device_count();
  r->found_good = bp_test::find_plugin("good") != nullptr;
  r->load = bp_registry_load(fixture("fake_gpu").c_str(), nullptr);
  r->discover = bp_registry_discover();
  r->unload = bp_plugin_unload(bp_test::find_plugin("good"));
  r->shutdown = bp_runtime_shutdown();
  bp_log_set_callback(reenter, user);  // re-installing from inside is fine too
}

TEST(RegistryThreading, RegistryCallsFromInsideAPluginInitDoNotDeadlock) {
  EXPECT_EXIT(
      {
        alarm(30);  // a deadlock ends the child with SIGALRM instead of hanging ctest
        static reentry r;
        if (bp_registry_load(fixture("good").c_str(), nullptr) != BP_OK) std::exit(10);
        size_t before = bp_device_count();
        // DEBUG: every refused call below also logs (its error, at debug
        // level) from inside the callback.
        bp_log_set_level(BP_LOG_DEBUG);
        bp_log_set_callback(reenter, &r);
        if (bp_registry_load(fixture("zero_devices").c_str(), nullptr) != BP_OK) std::exit(11);
        bp_log_set_callback(nullptr, nullptr);
        if (r.calls != 1) std::exit(12);
        if (r.devices != before || !r.found_good) std::exit(13);
        for (bp_status st : {r.load, r.discover, r.unload, r.shutdown})
          if (st != BP_ERR_FAILED_PRECONDITION) std::exit(14);
        // Nothing of it stuck: the refused calls work from outside.
        if (bp_registry_load(fixture("fake_gpu").c_str(), nullptr) != BP_OK) std::exit(15);
        if (bp_plugin_unload(bp_test::find_plugin("good")) != BP_OK) std::exit(16);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
