// environment_test.cpp: a plugin never changes the host process. The
// environment is the application's: listing every shipped
// plugin's devices, creating a backend on each and running a small graph
// there leaves every variable as it was, neither added, changed nor removed.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

extern char **environ;

namespace {

std::vector<std::string> environment() {
  std::vector<std::string> vars;
  for (char **e = environ; e && *e; ++e) vars.emplace_back(*e);
  std::sort(vars.begin(), vars.end());
  return vars;
}

// What a driver a plugin loads sets in the process by itself, which no
// plugin can prevent short of changing the environment back behind the
// driver's back: PoCL (the OpenCL CPU driver) sets HWLOC_PLUGINS_PATH=/dev/null
// in clGetPlatformIDs so hwloc loads no plugins of its own (libpocl.so.2).
bool set_by_a_driver(const std::string &var) { return var == "HWLOC_PLUGINS_PATH=/dev/null"; }

// c = a x b^T on |be|, 4 x 8 by 2 x 8, checked against the host's sums.
void run_small_graph(bp_backend *be, const std::string &label) {
  SCOPED_TRACE(label);
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 4);
  bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 2);
  bp_tensor *c = bp_mul_mat(ctx, a, b);
  bp_graph *g = bp_graph_new(ctx, 0);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_graph_build(g, c), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> av(32), bv(16), cv(8, -1.0f);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 5) - 2.0f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 3) - 1.0f;
  ASSERT_EQ(bp_tensor_set(a, av.data(), 0, av.size() * sizeof(float)), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(b, bv.data(), 0, bv.size() * sizeof(float)), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(c, cv.data(), 0, cv.size() * sizeof(float)), BP_OK) << bp_last_error();
  for (int n = 0; n < 2; ++n)
    for (int m = 0; m < 4; ++m) {
      float want = 0;
      for (int k = 0; k < 8; ++k) want += av[m * 8 + k] * bv[n * 8 + k];
      EXPECT_NEAR(cv[n * 4 + m], want, 1e-4f) << "c[" << n << "][" << m << "]";
    }
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
}

TEST(ShippedPlugins, LeaveTheEnvironmentAsItWas) {
  const std::vector<std::string> before = environment();
  ASSERT_EQ(bp_registry_add_path(BP_TEST_PLUGIN_DIR), BP_OK) << bp_last_error();
  const size_t n_devices = bp_device_count();
  size_t ran = 0;
  for (size_t i = 0; i < n_devices; ++i) {
    bp_device *dev = bp_device_get(i);
    bp_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_device_describe(dev, &info), BP_OK) << bp_last_error();
    const std::string plugin = bp_plugin_name(info.plugin);
    const std::string label = plugin + " device " + info.spec;
    // blas takes only products of at least min_mnk multiply-adds.
    const char *params = plugin == "blas" ? "min_mnk=0" : "";
    bp_backend *be = nullptr;
    ASSERT_EQ(bp_backend_new_on_device(dev, params, &be), BP_OK) << label << ": " << bp_last_error();
    run_small_graph(be, label);
    bp_backend_free(be);
    ++ran;
  }
  // Plugins that found no device here were still loaded and enumerated.
  for (size_t i = 0; i < bp_plugin_count(); ++i) bp_plugin_device_count(bp_plugin_get(i));
  EXPECT_GT(ran, 0u) << "no device ran a graph: the test proves nothing";
  const std::vector<std::string> after = environment();
  std::vector<std::string> added, removed;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(added));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(removed));
  for (const std::string &v : added) {
    if (set_by_a_driver(v)) {
      std::printf("set by a driver, not by a plugin: %s\n", v.c_str());
      continue;
    }
    ADD_FAILURE() << "set by a plugin: " << v;
  }
  for (const std::string &v : removed) ADD_FAILURE() << "removed or changed by a plugin: " << v;
}

}  // namespace
