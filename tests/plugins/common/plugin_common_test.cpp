// plugin_common_test.cpp: the plugins' shared ABI edge (plugins/common/
// plugin_common.hpp) tested directly: a device counted within a group.
#include <gtest/gtest.h>

#include <memory>
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

}  // namespace
