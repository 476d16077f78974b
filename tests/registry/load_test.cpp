// load_test.cpp: every broken fixture gives its status and message, is kept
// in the rejected list, and leaves the good plugins loadable
// (FAILURES.md #1-#10, #12).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "registry_test_util.hpp"

using bp_test::find_rejected;
using bp_test::fixture;
using bp_test::load_fixture;

namespace {

struct refused_case {
  std::string variant;
  bp_status status;
  std::vector<std::string> message_parts;
};

const std::vector<refused_case> k_refused = {
    {"not_elf", BP_ERR_INCOMPATIBLE, {"cannot load", "libbp-not_elf.so", "invalid ELF header"}},
    {"truncated", BP_ERR_INCOMPATIBLE, {"cannot load", "libbp-truncated.so"}},
    {"wrong_class", BP_ERR_INCOMPATIBLE, {"cannot load", "wrong ELF class: ELFCLASS32"}},
    {"unresolved_dep", BP_ERR_INCOMPATIBLE, {"cannot load", "libbp_missing_dep.so"}},
    {"missing_descriptor", BP_ERR_INCOMPATIBLE, {"not a Backplane plugin (missing bp_plugin_descriptor)"}},
    {"missing_entry", BP_ERR_INCOMPATIBLE, {"not a Backplane plugin (missing bp_plugin_entry)"}},
    {"bad_magic", BP_ERR_INCOMPATIBLE, {"bad descriptor magic 0x12345678"}},
    {"abi_major_old",
     BP_ERR_INCOMPATIBLE,
     {"was built for ABI 0, this Backplane speaks ABI 1", "the plugin is older", "rebuild it"}},
    {"abi_major_new",
     BP_ERR_INCOMPATIBLE,
     {"was built for ABI 2, this Backplane speaks ABI 1", "this Backplane is older"}},
    {"entry_null", BP_ERR_INCOMPATIBLE, {"bp_plugin_entry returned no table", "refuses every host"}},
    {"null_required_slot", BP_ERR_INCOMPATIBLE, {"plugin 'null_required_slot'", "bp_plugin_i.device_get is NULL"}},
    {"null_device_slot", BP_ERR_INCOMPATIBLE, {"device 0", "bp_device_i.get_props is NULL"}},
    {"reserved_param", BP_ERR_INCOMPATIBLE, {"'device' is reserved for the host"}},
    {"bad_name", BP_ERR_INCOMPATIBLE, {"plugin name \"Bad-Name!\" is invalid", "[a-z0-9_]+"}},
    {"init_fails", BP_ERR_INTERNAL, {"plugin 'init_fails' failed to initialise", "permission denied"}},
    {"init_unavailable", BP_ERR_UNAVAILABLE, {"unavailable on this machine", "no fake hardware"}},
    {"throws", BP_ERR_INTERNAL, {"plugin 'throws': device 0: get_props failed", "threw a std::runtime_error"}},
};

TEST(RegistryLoad, EachBrokenFixtureIsRefusedWithItsReason) {
  for (const refused_case &c : k_refused) {
    SCOPED_TRACE(c.variant);
    const std::string path = fixture(c.variant);
    bp_plugin *p = reinterpret_cast<bp_plugin *>(0x1);
    EXPECT_EQ(bp_registry_load(path.c_str(), &p), c.status) << bp_last_error();
    EXPECT_EQ(p, nullptr);
    const std::string message = bp_last_error();
    for (const std::string &part : c.message_parts)
      EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message;
    bp_status listed = BP_OK;
    std::string listed_message;
    ASSERT_TRUE(find_rejected(path, &listed, &listed_message)) << "not in the rejected list: " << path;
    EXPECT_EQ(listed, c.status);
    EXPECT_EQ(listed_message, message);
  }
  // Trying again gives the same answer and keeps one entry per file.
  size_t before = bp_rejected_count();
  EXPECT_EQ(bp_registry_load(fixture("not_elf").c_str(), nullptr), BP_ERR_INCOMPATIBLE);
  EXPECT_EQ(bp_rejected_count(), before);
}

TEST(RegistryLoad, MissingFileIsNotFoundWithPathAndDlerror) {
  const std::string path = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-does_not_exist.so";
  EXPECT_EQ(bp_registry_load(path.c_str(), nullptr), BP_ERR_NOT_FOUND);
  std::string message = bp_last_error();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  bp_status listed = BP_OK;
  EXPECT_TRUE(find_rejected(path, &listed, nullptr));
  EXPECT_EQ(listed, BP_ERR_NOT_FOUND);
}

TEST(RegistryLoad, BadArguments) {
  EXPECT_EQ(bp_registry_load(nullptr, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_registry_load("", nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_registry_load(BP_TEST_FIXTURE_DIR, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("not a regular file"), std::string::npos);
  EXPECT_EQ(bp_plugin_name(nullptr), nullptr);
  EXPECT_EQ(bp_plugin_unload(nullptr), BP_ERR_INVALID_ARGUMENT);
  bp_device_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(bp_device_get_info(nullptr, &info), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_rejected_get(1u << 30, nullptr, nullptr, nullptr), BP_ERR_NOT_FOUND);
}

TEST(RegistryLoad, GoodPluginsLoadAlongsideBrokenOnes) {
  for (const refused_case &c : k_refused) bp_registry_load(fixture(c.variant).c_str(), nullptr);
  for (const char *variant : {"good", "abi_minor_new", "zero_devices", "fail_alloc", "lost_after", "fake_gpu"}) {
    SCOPED_TRACE(variant);
    bp_plugin *p = load_fixture(variant);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(std::string(bp_plugin_name(p)), variant);
    EXPECT_EQ(bp_plugin_find(variant), p);
    EXPECT_FALSE(find_rejected(fixture(variant), nullptr, nullptr));
  }
  EXPECT_EQ(bp_plugin_device_count(bp_plugin_find("zero_devices")), 0u);  // zero devices is not an error
  EXPECT_EQ(bp_plugin_device_count(bp_plugin_find("fake_gpu")), 2u);
  // The real cpu plugin, found by discovery in the build tree.
  bp_plugin *cpu = bp_plugin_find("cpu");
  if (!cpu) GTEST_SKIP() << "libbp-cpu.so not built in " << BP_TEST_PLUGIN_DIR;
  EXPECT_GE(bp_plugin_device_count(cpu), 1u);
  std::string path = bp_plugin_path(cpu);
  EXPECT_NE(path.find("libbp-cpu.so"), std::string::npos);
}

TEST(RegistryLoad, PluginAndDeviceInfoAreCopied) {
  bp_plugin *p = load_fixture("fake_gpu");
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(bp_plugin_version(p), "0.1.0");
  EXPECT_NE(std::string(bp_plugin_description(p)).find("registry test fixture"), std::string::npos);
  char real[4096];
  ASSERT_NE(realpath(fixture("fake_gpu").c_str(), real), nullptr);
  EXPECT_STREQ(bp_plugin_path(p), real);
  ASSERT_EQ(bp_plugin_n_params(p), 5u);
  const bp_param_info *flavor = bp_plugin_param(p, 0);
  ASSERT_NE(flavor, nullptr);
  EXPECT_STREQ(flavor->name, "flavor");
  EXPECT_EQ(flavor->type, BP_PARAM_INT);
  EXPECT_STREQ(flavor->default_value, "0");
  EXPECT_EQ(flavor->max_value, 100);
  EXPECT_EQ(bp_plugin_param(p, 5), nullptr);
  for (size_t i = 0; i < 2; ++i) {
    bp_device *dev = bp_plugin_device(p, i);
    ASSERT_NE(dev, nullptr);
    bp_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_device_get_info(dev, &info), BP_OK) << bp_last_error();
    EXPECT_EQ(info.index, i);
    EXPECT_EQ(info.plugin, p);
    EXPECT_EQ(info.type, BP_DEVICE_TYPE_GPU);
    EXPECT_EQ(std::string(info.spec), "fake_gpu:" + std::to_string(i));
    EXPECT_EQ(std::string(info.id), std::string("fake-fake_gpu-") + char('A' + i));
    EXPECT_EQ(std::string(info.name), "FAKE" + std::to_string(i));
    EXPECT_EQ(info.memory_total, (1ull << 20) * (i + 1));
    EXPECT_TRUE(info.caps & BP_DEVICE_CAP_HOST_MEMORY);
  }
  bp_device_info small{};
  small.struct_size = 8;
  EXPECT_EQ(bp_device_get_info(bp_plugin_device(p, 0), &small), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(bp_device_type_name(BP_DEVICE_TYPE_GPU), "GPU");
  EXPECT_STREQ(bp_device_type_name(static_cast<bp_device_type>(42)), "UNKNOWN");
}

TEST(RegistryLoad, GlobalDeviceListCoversEveryPlugin) {
  load_fixture("fake_gpu");
  size_t total = 0;
  for (size_t i = 0, n = bp_plugin_count(); i < n; ++i) total += bp_plugin_device_count(bp_plugin_get(i));
  EXPECT_EQ(bp_device_count(), total);
  for (size_t i = 0; i < total; ++i) EXPECT_NE(bp_device_get(i), nullptr);
  EXPECT_EQ(bp_device_get(total), nullptr);
  EXPECT_EQ(bp_plugin_get(bp_plugin_count()), nullptr);
}

TEST(RegistryLoad, SameFileTwiceReturnsTheSamePlugin) {
  bp_plugin *a = load_fixture("good");
  bp_plugin *b = nullptr;
  ASSERT_EQ(bp_registry_load(fixture("good").c_str(), &b), BP_OK);
  EXPECT_EQ(a, b);
  // Through another spelling of the same path, too (realpath).
  std::string other = std::string(BP_TEST_FIXTURE_DIR) + "/deps/../libbp-good.so";
  ASSERT_EQ(bp_registry_load(other.c_str(), &b), BP_OK) << bp_last_error();
  EXPECT_EQ(a, b);
}

TEST(RegistryLoad, ThreePluginsWithOneNameKeepTheFirst) {
  bp_plugin *a = load_fixture("dup_name_a");
  ASSERT_NE(a, nullptr);
  for (const char *variant : {"dup_name_b", "dup_name_c"}) {
    bp_plugin *p = nullptr;
    EXPECT_EQ(bp_registry_load(fixture(variant).c_str(), &p), BP_ERR_ALREADY_EXISTS);
    EXPECT_EQ(p, nullptr);
    std::string message = bp_last_error();
    EXPECT_NE(message.find("plugin name 'dup_name'"), std::string::npos) << message;
    EXPECT_NE(message.find(bp_plugin_path(a)), std::string::npos) << message;       // the one that won
    EXPECT_NE(message.find(std::string("libbp-") + variant), std::string::npos) << message;  // the refused one
    bp_status listed = BP_OK;
    EXPECT_TRUE(find_rejected(std::string(BP_TEST_FIXTURE_DIR) + "/libbp-" + variant + ".so", &listed, nullptr));
    EXPECT_EQ(listed, BP_ERR_ALREADY_EXISTS);
  }
  EXPECT_EQ(bp_plugin_find("dup_name"), a);
}

TEST(RegistryLoad, PluginLogsCarryThePluginName) {
  bp_plugin *p = load_fixture("abi_minor_new");
  ASSERT_NE(p, nullptr);
  bp_test::log_capture logs;
  ASSERT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
  EXPECT_EQ(logs.count("abi_minor_new", "fake: shutdown"), 1u);
  ASSERT_NE(load_fixture("abi_minor_new"), nullptr);
  EXPECT_EQ(logs.count("abi_minor_new", "fake: init"), 1u);
  EXPECT_GE(logs.count("registry", "loaded plugin 'abi_minor_new'"), 1u);
}

}  // namespace
