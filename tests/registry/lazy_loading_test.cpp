// lazy_loading_test.cpp: a process opens only the plugin files it uses
// (PLG-21, registry/demand.cpp). A spec naming plugins loads those; "auto",
// device and plugin listings load every file found. Each case runs
// bp_registry_probe (tests/fixtures/registry_probe.c) in a fresh process and
// reads its /proc/self/maps, so nothing an earlier test loaded counts. A
// trap plugin (its constructor ends the process with status 86) on
// BP_PLUGIN_PATH proves a file was never opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "registry_test_util.hpp"

namespace fs = std::filesystem;
using bp_test::child_result;
using bp_test::fixture;
using bp_test::run_child;
using bp_test::temp_dir;

namespace {

constexpr int k_trap_status = 86;
const std::string k_probe = std::string(BP_TEST_FIXTURE_DIR) + "/env/bp_registry_probe";
const std::string k_trap = std::string(BP_TEST_FIXTURE_DIR) + "/trap/libbp-trap.so";
const std::string k_plugins = BP_TEST_PLUGIN_DIR;

// Libraries only other plugins bring in (vulkan, opencl, remote).
const std::vector<std::string> k_foreign_libs = {"libvulkan.so", "libOpenCL.so", "libgrpc", "libprotobuf", "libabsl_"};

struct probe_result {
  int status = -1;
  std::string out;
  std::vector<std::string> lines;
  std::vector<std::string> mapped;  // paths from the "mapped" lines
};

probe_result probe(const std::vector<std::string> &commands, const std::string &plugin_path) {
  std::vector<std::string> argv = {k_probe};
  argv.insert(argv.end(), commands.begin(), commands.end());
  child_result r = run_child(argv, {{"BP_PLUGIN_PATH", plugin_path}});
  probe_result p;
  p.status = r.status;
  p.out = r.out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    p.lines.push_back(line);
    if (line.rfind("mapped ", 0) == 0) p.mapped.push_back(line.substr(7));
  }
  return p;
}

std::string base_of(const std::string &path) { return fs::path(path).filename().string(); }

// Base names of the mapped libbp-*.so files.
std::set<std::string> mapped_plugins(const probe_result &r) {
  std::set<std::string> names;
  for (const std::string &path : r.mapped) {
    const std::string base = base_of(path);
    if (base.rfind("libbp-", 0) == 0 && base.size() > 9 && base.compare(base.size() - 3, 3, ".so") == 0)
      names.insert(base);
  }
  return names;
}

// Mapped files whose base name contains one of |parts|.
std::vector<std::string> mapped_matching(const probe_result &r, const std::vector<std::string> &parts) {
  std::vector<std::string> found;
  for (const std::string &path : r.mapped)
    for (const std::string &part : parts)
      if (base_of(path).find(part) != std::string::npos) found.push_back(path);
  return found;
}

// The first line starting with |prefix|, or "".
std::string line_of(const probe_result &r, const std::string &prefix) {
  for (const std::string &line : r.lines)
    if (line.rfind(prefix, 0) == 0) return line;
  return {};
}

bool has_line(const probe_result &r, const std::string &line) {
  for (const std::string &l : r.lines)
    if (l == line) return true;
  return false;
}

// The "plugin <name> <path>" lines, in order.
std::vector<std::string> plugin_lines(const probe_result &r) {
  std::vector<std::string> out;
  for (const std::string &line : r.lines)
    if (line.rfind("plugin ", 0) == 0) out.push_back(line);
  return out;
}

bool built(const std::string &plugin) { return fs::exists(k_plugins + "/libbp-" + plugin + ".so"); }

// A folder holding the trap and some fixture plugins, for BP_PLUGIN_PATH.
class LazyFolder {
 public:
  explicit LazyFolder(const std::vector<std::string> &variants, bool with_trap = true) {
    for (const std::string &v : variants) fs::copy_file(fixture(v), dir_.path() / ("libbp-" + v + ".so"));
    if (with_trap) fs::copy_file(k_trap, dir_.path() / "libbp-trap.so");
  }
  std::string path() const { return dir_.path().string(); }
  std::string file(const std::string &variant) const { return (dir_.path() / ("libbp-" + variant + ".so")).string(); }

 private:
  temp_dir dir_;
};

class RegistryLazyLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string &f : {k_probe, k_trap}) ASSERT_TRUE(fs::exists(f)) << f << " is not built";
  }
};

TEST_F(RegistryLazyLoading, CpuSpecMapsOnlyTheCpuPlugin) {
  if (!built("cpu")) GTEST_SKIP() << "cpu plugin not built";
  LazyFolder folder({"good", "fake_gpu"});
  for (const std::string spec : {"cpu", "cpu:threads=2", "cpu:0"}) {
    SCOPED_TRACE(spec);
    probe_result r = probe({"backend=" + spec, "maps"}, folder.path());
    ASSERT_NE(r.status, k_trap_status) << "a spec naming cpu opened the trap plugin\n" << r.out;
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(line_of(r, "backend "), "backend OK ") << r.out;
    EXPECT_EQ(mapped_plugins(r), std::set<std::string>{"libbp-cpu.so"}) << r.out;
    EXPECT_EQ(mapped_matching(r, k_foreign_libs), std::vector<std::string>{}) << r.out;
  }
}

TEST_F(RegistryLazyLoading, SpecListMapsOnlyTheNamedPlugins) {
  // Fixtures only: the same on every build.
  LazyFolder folder({"good", "fake_gpu", "zero_devices", "lazy"});
  probe_result r = probe({"backend=fake_gpu;good", "maps"}, folder.path());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(line_of(r, "backend "), "backend OK ") << r.out;
  EXPECT_EQ(mapped_plugins(r), (std::set<std::string>{"libbp-fake_gpu.so", "libbp-good.so"})) << r.out;
}

TEST_F(RegistryLazyLoading, VulkanAndCpuSpecMapsOnlyThoseTwo) {
  if (!built("vulkan") || !built("cpu")) GTEST_SKIP() << "vulkan or cpu plugin not built";
  LazyFolder folder({"good"});
  // With or without a Vulkan device here: which files were opened is the point.
  probe_result r = probe({"backend=vulkan;cpu", "maps"}, folder.path());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(mapped_plugins(r), (std::set<std::string>{"libbp-cpu.so", "libbp-vulkan.so"})) << r.out;
  EXPECT_EQ(mapped_matching(r, {"libOpenCL.so", "libgrpc", "libprotobuf", "libabsl_"}), std::vector<std::string>{})
      << r.out;
}

TEST_F(RegistryLazyLoading, ListingsAndAutoOpenEveryFile) {
  LazyFolder folder({"good"});
  for (const std::string command : {"devices", "list", "backend=auto", "backend=good;auto"}) {
    SCOPED_TRACE(command);
    probe_result r = probe({command}, folder.path());
    EXPECT_EQ(r.status, k_trap_status) << "the trap plugin on BP_PLUGIN_PATH was not opened\n" << r.out;
  }
}

TEST_F(RegistryLazyLoading, DeviceCountMapsEveryPlugin) {
  LazyFolder folder({"good", "fake_gpu"}, false);
  probe_result r = probe({"devices", "maps", "list"}, folder.path());
  ASSERT_EQ(r.status, 0) << r.out;
  std::set<std::string> mapped, refused;
  for (const std::string &path : r.mapped) mapped.insert(path);
  for (const std::string &line : r.lines)
    if (line.rfind("rejected ", 0) == 0) refused.insert(line.substr(line.find(' ', 9) + 1));
  // Every file found is loaded (mapped) or refused (listed).
  std::vector<fs::path> files = {folder.file("good"), folder.file("fake_gpu")};
  for (const auto &e : fs::directory_iterator(k_plugins))
    if (e.path().filename().string().rfind("libbp-", 0) == 0) files.push_back(e.path());
  for (const fs::path &f : files) {
    const std::string real = fs::canonical(f).string();
    EXPECT_TRUE(mapped.count(real) || refused.count(real)) << real << " is neither mapped nor refused\n" << r.out;
  }
  EXPECT_TRUE(mapped.count(folder.file("good"))) << r.out;
}

TEST_F(RegistryLazyLoading, UnknownNameStillListsEveryPlugin) {
  LazyFolder folder({"good", "fake_gpu"}, false);
  probe_result r = probe({"backend=no_such_plugin"}, folder.path());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string line = line_of(r, "backend ");
  EXPECT_EQ(line.rfind("backend NOT_FOUND ", 0), 0u) << r.out;
  EXPECT_NE(line.find("no plugin named 'no_such_plugin' is loaded (loaded: "), std::string::npos) << line;
  EXPECT_NE(line.find("fake_gpu"), std::string::npos) << line;
  EXPECT_NE(line.find("good"), std::string::npos) << line;
  EXPECT_NE(line.find("run bp-devices"), std::string::npos) << line;
}

TEST_F(RegistryLazyLoading, RefusedFileOfTheNameGivesItsReason) {
  temp_dir dir;
  fs::copy_file(fixture("not_elf"), dir.path() / "libbp-good.so");
  probe_result r = probe({"backend=good"}, dir.path().string());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string line = line_of(r, "backend ");
  EXPECT_EQ(line.rfind("backend NOT_FOUND ", 0), 0u) << r.out;
  EXPECT_NE(line.find((dir.path() / "libbp-good.so").string() + " was refused"), std::string::npos) << line;
  EXPECT_NE(line.find("invalid ELF header"), std::string::npos) << line;
}

TEST_F(RegistryLazyLoading, FirstLoadableFileOfTheNameWinsTheRestAreShadowed) {
  temp_dir a, b, c;
  fs::copy_file(fixture("not_elf"), a.path() / "libbp-good.so");  // refused: the next one is tried
  fs::copy_file(fixture("good"), b.path() / "libbp-good.so");
  fs::copy_file(fixture("good"), c.path() / "libbp-good.so");
  const std::string path = a.path().string() + ":" + b.path().string() + ":" + c.path().string();
  probe_result r = probe({"find=good", "maps", "list"}, path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has_line(r, "find good " + (b.path() / "libbp-good.so").string())) << r.out;
  EXPECT_EQ(r.out.find("mapped " + (c.path() / "libbp-good.so").string()), std::string::npos)
      << "the third file was opened, though the second one loaded\n"
      << r.out;
  EXPECT_TRUE(has_line(r, "rejected INCOMPATIBLE " + (a.path() / "libbp-good.so").string())) << r.out;
  EXPECT_TRUE(has_line(r, "rejected ALREADY_EXISTS " + (c.path() / "libbp-good.so").string())) << r.out;
}

TEST_F(RegistryLazyLoading, ExplicitLoadDoesNotTakeTheNameOfAFoundFile) {
  // Once the folders were scanned, a found file keeps its name, as it did
  // when discovery loaded every file at once: bp_registry_load of another
  // file of that name gives ALREADY_EXISTS.
  LazyFolder folder({"good", "zero_devices"}, false);
  probe_result r = probe({"find=zero_devices", "load=" + fixture("good"), "list"}, folder.path());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string line = line_of(r, "load ");
  EXPECT_EQ(line.rfind("load ALREADY_EXISTS ", 0), 0u) << r.out;
  EXPECT_NE(line.find(folder.file("good")), std::string::npos) << line;
  EXPECT_TRUE(has_line(r, "plugin good " + folder.file("good"))) << r.out;
}

TEST_F(RegistryLazyLoading, ListingOrderDoesNotDependOnWhatLoadedFirst) {
  LazyFolder folder({"good", "fake_gpu", "zero_devices"}, false);
  probe_result all_at_once = probe({"list"}, folder.path());
  // Loaded first: the last of the folder, then the first.
  probe_result named_first = probe({"find=zero_devices", "backend=fake_gpu", "list"}, folder.path());
  ASSERT_EQ(all_at_once.status, 0) << all_at_once.out;
  ASSERT_EQ(named_first.status, 0) << named_first.out;
  EXPECT_EQ(line_of(named_first, "backend "), "backend OK ") << named_first.out;
  EXPECT_GE(plugin_lines(all_at_once).size(), 3u) << all_at_once.out;
  EXPECT_EQ(plugin_lines(named_first), plugin_lines(all_at_once)) << named_first.out << "\n" << all_at_once.out;
}

TEST_F(RegistryLazyLoading, ConcurrentSpecsAndListingsLoadEachFileOnce) {
  LazyFolder folder({"good", "fake_gpu", "zero_devices"}, false);
  probe_result r = probe({"threads=good;fake_gpu", "list"}, folder.path());
  ASSERT_EQ(r.status, 0) << r.out;  // a ThreadSanitizer report fails the child too
  EXPECT_TRUE(has_line(r, "threads 4 made")) << r.out;
  for (const std::string name : {"good", "fake_gpu", "zero_devices"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(has_line(r, "plugin " + name + " " + folder.file(name))) << r.out;
  }
  EXPECT_EQ(line_of(r, "rejected "), "") << r.out;
}

}  // namespace
