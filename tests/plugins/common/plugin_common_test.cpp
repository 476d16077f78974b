// plugin_common_test.cpp: the plugins' shared ABI edge (plugins/common/
// plugin_common.hpp) tested directly: the guarded init and shutdown, and a
// device counted within a group.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugins/common/plugin_common.hpp"

namespace {

struct fake_device {
  uint32_t group;
};

std::vector<std::unique_ptr<fake_device>> devices_in(std::initializer_list<uint32_t> groups) {
  std::vector<std::unique_ptr<fake_device>> all;
  for (uint32_t g : groups) all.push_back(std::make_unique<fake_device>(fake_device{g}));
  return all;
}

TEST(PluginCommon, PickInGroupCountsTheIndexWithinTheGroup) {
  const auto all = devices_in({0, 1, 0, 1, 1});
  auto in = [](uint32_t g) { return [g](const fake_device &d) { return d.group == g; }; };
  fake_device *out = nullptr;
  bp_error err{};
  ASSERT_EQ(bp::plugins::pick_in_group(all, 0, in(1), "platform=1", "-", &out, &err), BP_OK);
  EXPECT_EQ(out, all[1].get());
  ASSERT_EQ(bp::plugins::pick_in_group(all, 2, in(1), "platform=1", "-", &out, &err), BP_OK);
  EXPECT_EQ(out, all[4].get());
  ASSERT_EQ(bp::plugins::pick_in_group(all, 1, in(0), "platform=0", "-", &out, &err), BP_OK);
  EXPECT_EQ(out, all[2].get());
}

TEST(PluginCommon, PickInGroupNamesTheGroupWhenItCannot) {
  const auto all = devices_in({0, 0});
  fake_device *out = nullptr;
  bp_error err{};
  auto in_group_0 = [](const fake_device &d) { return d.group == 0; };
  auto in_group_3 = [](const fake_device &d) { return d.group == 3; };
  EXPECT_EQ(bp::plugins::pick_in_group(all, 2, in_group_0, "server=a:1", "-", &out, &err), BP_ERR_NOT_FOUND);
  EXPECT_STREQ(err.message, "server=a:1 has devices 0..1, not 2");
  EXPECT_EQ(bp::plugins::pick_in_group(all, 0, in_group_3, "platform=3", "platforms with devices: 0..0", &out, &err),
            BP_ERR_NOT_FOUND);
  EXPECT_STREQ(err.message, "platform=3 has no devices (platforms with devices: 0..0)");
  EXPECT_EQ(out, nullptr);  // untouched on failure
}

struct counted_state {
  static inline int alive = 0;
  const bp_host_api *host = nullptr;
  int setups = 0;
  counted_state() { ++alive; }
  ~counted_state() { --alive; }
};

int g_setup_mode = 0;  // 0: pass, 1: fail, 2: throw

bp_status counted_setup(counted_state &s, bp_error *err) {
  ++s.setups;
  if (g_setup_mode == 1) return bp_error_set(err, BP_ERR_UNAVAILABLE, "no such hardware");
  if (g_setup_mode == 2) throw std::runtime_error("setup threw");
  return BP_OK;
}

using lifecycle = bp::plugins::plugin_lifecycle<counted_state, counted_setup>;

TEST(PluginCommon, LifecycleKeepsTheHostTableInTheState) {
  g_setup_mode = 0;
  bp_host_api host{};
  void *plugin = &host;
  bp_error err{};
  ASSERT_EQ(lifecycle::init_with_host(&host, &plugin, &err), BP_OK) << err.message;
  auto *s = static_cast<counted_state *>(plugin);
  EXPECT_EQ(s->host, &host);
  EXPECT_EQ(s->setups, 1);
  lifecycle::shutdown(plugin);
  EXPECT_EQ(counted_state::alive, 0);
  // A host of ABI 1.1 calls init: the same, with no host table.
  ASSERT_EQ(lifecycle::init(&plugin, &err), BP_OK) << err.message;
  EXPECT_EQ(static_cast<counted_state *>(plugin)->host, nullptr);
  lifecycle::shutdown(plugin);
  lifecycle::shutdown(nullptr);  // a no-op
  EXPECT_EQ(counted_state::alive, 0);
}

TEST(PluginCommon, LifecycleFailureLeavesNothingAndClearsTheOutPointer) {
  bp_host_api host{};
  bp_error err{};
  EXPECT_EQ(lifecycle::init_with_host(&host, nullptr, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "init needs an out pointer");
  for (int mode : {1, 2}) {
    SCOPED_TRACE(mode);
    g_setup_mode = mode;
    void *plugin = &host;  // stale: must be cleared
    const bp_status st = lifecycle::init_with_host(&host, &plugin, &err);
    EXPECT_EQ(st, mode == 1 ? BP_ERR_UNAVAILABLE : BP_ERR_INTERNAL);
    EXPECT_STREQ(err.message, mode == 1 ? "no such hardware" : "setup threw");
    EXPECT_EQ(plugin, nullptr);
    EXPECT_EQ(counted_state::alive, 0);
  }
  g_setup_mode = 0;
}

}  // namespace
