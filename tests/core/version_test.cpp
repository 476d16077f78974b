// version_test.cpp: the library's run-time version matches the generated
// header it was built with (both come from project(VERSION)).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backplane/backplane.h"
#include "backplane/version.h"

TEST(Version, RunTimeMatchesTheHeader) {
  EXPECT_EQ(bp_version(), static_cast<uint32_t>(BP_VERSION));
  EXPECT_STREQ(bp_version_string(), BP_VERSION_STRING);
  char text[32];
  std::snprintf(text, sizeof text, "%d.%d.%d", BP_VERSION_MAJOR, BP_VERSION_MINOR, BP_VERSION_PATCH);
  EXPECT_EQ(std::string(text), BP_VERSION_STRING);
  EXPECT_EQ(BP_VERSION, BP_VERSION_MAJOR * 10000 + BP_VERSION_MINOR * 100 + BP_VERSION_PATCH);
}

TEST(Version, MakeVersionOrders) {
  EXPECT_LT(BP_MAKE_VERSION(0, 9, 9), BP_MAKE_VERSION(1, 0, 0));
  EXPECT_LT(BP_MAKE_VERSION(1, 2, 3), BP_MAKE_VERSION(1, 3, 0));
}
