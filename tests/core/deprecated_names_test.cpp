// The 0.1 names kept as deprecated aliases (deprecated.h, docs/api-guide.md
// "Renamed in 0.2") still work and reach the same functions as the new ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "backplane/backplane.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

TEST(DeprecatedNames, ForwardToTheNewFunctions) {
  bp_context *ctx = bp_context_new(0);
  ASSERT_NE(ctx, nullptr);
  bp_tensor *a = bp_new_tensor_2d(ctx, BP_TYPE_F32, 4, 3);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne[0], 4);
  EXPECT_EQ(a->ne[1], 3);
  EXPECT_EQ(bp_set_name(a, "a"), a);
  EXPECT_STREQ(a->name, "a");
  EXPECT_EQ(bp_context_n_tensors(ctx), bp_context_tensor_count(ctx));
  // Failures carry the new function's status and message.
  EXPECT_EQ(bp_new_tensor_1d(ctx, BP_TYPE_F32, -1), nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);

  bp_tensor *y = bp_relu(ctx, a);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, y), BP_OK);
  EXPECT_EQ(bp_graph_n_nodes(g), bp_graph_node_count(g));
  EXPECT_EQ(bp_graph_n_leafs(g), bp_graph_leaf_count(g));

  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_init("cpu", &be), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_alloc_ctx_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  const float in[12] = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11, 12};
  ASSERT_EQ(bp_tensor_set(a, in, 0, sizeof in), BP_OK);
  bp_sched *s = bp_sched_new(&be, nullptr, 1, 0, false);
  ASSERT_NE(s, nullptr) << bp_last_error();
  ASSERT_EQ(bp_sched_graph_compute(s, g), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_sched_get_n_backends(s), 1);
  EXPECT_EQ(bp_sched_get_backend(s, 0), be);
  EXPECT_EQ(bp_sched_get_backend(s, -1), nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sched_get_n_splits(s), (int)bp_sched_split_count(s));
  EXPECT_EQ(bp_sched_get_n_copies(s), 0);
  bp_sched_split_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_sched_get_split(s, 0, &info), BP_OK);
  EXPECT_EQ(info.backend, be);
  float out[12];
  ASSERT_EQ(bp_tensor_get(y, out, 0, sizeof out), BP_OK);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], in[i] > 0 ? in[i] : 0.0f);

  bp_sched_free(s);
  bp_buffer_free(buf);
  bp_backend_free(be);
  bp_graph_free(g);
  bp_context_free(ctx);
}

}  // namespace

// The names renamed before 0.3 (deprecated.h's second block) forward too.
TEST(DeprecatedNames, RenamedBefore03ForwardToTheNewFunctions) {
  bp_context *ctx = bp_context_new(0);
  ASSERT_NE(ctx, nullptr);
  bp_tensor *a = bp_tensor_set_name(bp_tensor_new_1d(ctx, BP_TYPE_F32, 32), "a");
  EXPECT_EQ(bp_context_find(ctx, "a"), a);
  EXPECT_EQ(bp_context_find(ctx, "b"), nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_NOT_FOUND);

  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * (float)(i - 16);
  unsigned char q[34] = {0};
  EXPECT_EQ(bp_quantize(BP_TYPE_Q8_0, x, q, 1, 32), 34u);
  EXPECT_EQ(bp_quantize(BP_TYPE_Q8_0, x, q, 1, 31), 0u);  // not whole blocks
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);

  bp_plugin *cpu = bp_plugin_find("cpu");
  ASSERT_NE(cpu, nullptr) << bp_last_error();
  EXPECT_EQ(bp_plugin_find("no_such_plugin"), nullptr);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("cpu", &be), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_backend_get_device(be), bp_backend_device(be));
  bp_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_device_get_info(bp_backend_device(be), &info), BP_OK);
  EXPECT_NE(info.name, nullptr);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_buffer_get_type(buf), bp_buffer_buffer_type(buf));

  bp_tensor *y = bp_relu(ctx, a);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, y), BP_OK);
  bp_gallocr *ga = bp_gallocr_new(bp_backend_buffer_type(be));
  ASSERT_EQ(bp_gallocr_reserve(ga, g), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_gallocr_get_buffer_size(ga), bp_gallocr_buffer_size(ga));
  bp_gallocr_free(ga);
  bp_sched *s = bp_sched_new(&be, nullptr, 1, 0, false);
  ASSERT_NE(s, nullptr) << bp_last_error();
  ASSERT_EQ(bp_sched_graph_compute(s, g), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_sched_get_buffer_size(s, be), bp_sched_buffer_size(s, be));
  bp_sched_split_info split{};
  split.struct_size = sizeof split;
  ASSERT_EQ(bp_sched_split(s, 0, &split), BP_OK);
  EXPECT_EQ(split.backend, be);

  bp_sched_free(s);
  bp_graph_free(g);
  bp_buffer_free(buf);
  bp_backend_free(be);
  bp_context_free(ctx);
}

namespace {

const std::filesystem::path k_include = std::filesystem::path(BP_TEST_SOURCE_DIR).parent_path() / "include/backplane";

std::string read_text(const std::filesystem::path &p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Each public enum type (typedef enum ... in the installed headers).
std::set<std::string> public_enum_types() {
  std::set<std::string> out;
  const std::regex def(R"(typedef enum (\w+))");
  for (const auto &e : std::filesystem::directory_iterator(k_include)) {
    const std::string s = read_text(e.path());
    for (auto it = std::sregex_iterator(s.begin(), s.end(), def); it != std::sregex_iterator(); ++it)
      out.insert((*it)[1]);
  }
  return out;
}

// The deprecated names (deprecated.h, gguf.h's deprecated block) with an
// enum among their parameters: the ones AnOutOfRangeEnumIsRefused calls.
TEST(DeprecatedNames, EveryForwarderTakingAnEnumIsCalledWithABadOne) {
  const std::set<std::string> enums = public_enum_types();
  ASSERT_TRUE(enums.count("bp_type"));
  std::set<std::string> takers;
  const std::regex decl(R"(BP_API[^;(]*?(bp_\w+)\(([^;)]*)\);)");
  for (const char *h : {"deprecated.h", "gguf.h"}) {
    std::string s = read_text(k_include / h);
    if (std::string(h) == "gguf.h") s = s.substr(s.find("#ifndef BP_NO_DEPRECATED"));
    for (auto it = std::sregex_iterator(s.begin(), s.end(), decl); it != std::sregex_iterator(); ++it) {
      const std::string params = (*it)[2];
      for (const std::string &e : enums) {
        if (std::regex_search(params, std::regex("\\b" + e + " "))) takers.insert((*it)[1]);
      }
    }
  }
  const std::set<std::string> covered = {"bp_new_tensor",    "bp_new_tensor_1d", "bp_new_tensor_2d",
                                         "bp_new_tensor_3d", "bp_new_tensor_4d", "bp_quantize"};
  EXPECT_EQ(takers, covered) << "a deprecated forwarder takes an enum: add it to AnOutOfRangeEnumIsRefused";
}

// A C caller may pass any int as a bp_type. The forwarders refuse it as
// the 0.2 functions do (status, message) and never load it as the enum:
// the ASan + UBSan pass of the test suite halts on such a load.
TEST(DeprecatedNames, AnOutOfRangeEnumIsRefused) {
  bp_context *ctx = bp_context_new(0);
  ASSERT_NE(ctx, nullptr);
  const int64_t ne[4] = {32, 2, 2, 2};
  float x[32] = {};
  unsigned char q[64] = {};
  for (const int v : {130, -1, static_cast<int>(BP_TYPE_COUNT), 1000}) {
    SCOPED_TRACE(v);
    // The 0.2 function's message is the reference.
    ASSERT_EQ(bp_tensor_new_1d(ctx, static_cast<bp_type>(v), 32), nullptr);
    const std::string want = bp_last_error();
    EXPECT_NE(want.find("unknown type " + std::to_string(v)), std::string::npos) << want;
    auto refused = [&](const char *name, const bp_tensor *t) {
      EXPECT_EQ(t, nullptr) << name;
      EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT) << name;
      EXPECT_EQ(std::string(bp_last_error()), want) << name;
    };
    refused("bp_new_tensor", bp_new_tensor(ctx, static_cast<bp_type>(v), 4, ne));
    refused("bp_new_tensor_1d", bp_new_tensor_1d(ctx, static_cast<bp_type>(v), 32));
    refused("bp_new_tensor_2d", bp_new_tensor_2d(ctx, static_cast<bp_type>(v), 32, 2));
    refused("bp_new_tensor_3d", bp_new_tensor_3d(ctx, static_cast<bp_type>(v), 32, 2, 2));
    refused("bp_new_tensor_4d", bp_new_tensor_4d(ctx, static_cast<bp_type>(v), 32, 2, 2, 2));

    ASSERT_NE(bp_quantize_rows(static_cast<bp_type>(v), x, q, 1, 32, nullptr), BP_OK);
    const std::string want_q = bp_last_error();
    EXPECT_NE(want_q.find("unknown type " + std::to_string(v)), std::string::npos) << want_q;
    EXPECT_EQ(bp_quantize(static_cast<bp_type>(v), x, q, 1, 32), 0u);
    EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(bp_last_error()), want_q);
  }
  EXPECT_EQ(bp_context_tensor_count(ctx), 0u);
  bp_context_free(ctx);
}

}  // namespace
