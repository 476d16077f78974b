// null_args_test.cpp: for every public function.
//
// The list of functions comes from include/backplane/backplane.h itself: a
// function added to the header without a row in the table below fails
// EveryHeaderFunctionHasARow, so none can be forgotten. Each row calls the
// function with every argument zero (NULL, 0, false, the first enum value)
// and states the outcome:
//   - its own status and a message naming the function, never the previous
//     call's (clear-on-entry);
//   - for graph-building calls, the previous call's failure (NULL
//     propagation), and with a clean previous call "<fn>: ... is NULL";
//   - for the error-state and name functions, the state untouched.
// A second test reads the sources and checks that every definition opens
// the API scope (BP_API_SCOPE or api_guard), the mechanism behind the rule.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "backplane/backplane.h"

namespace {

enum class kind {
  own,      // fails with |code|, message names the function
  ok,       // succeeds: BP_OK and ""
  any,      // depends on the machine (a plugin may be loaded): own outcome, never the previous one
  builder,  // graph-building: propagates the previous failure, else |code| naming the function
  neutral,  // never fails and leaves the state alone
  special,  // tested elsewhere in this file (named in |why|)
};

struct row {
  kind k;
  bp_status code;
  std::function<void()> call;
};

// Calls |f| with every argument value-initialised.
template <typename R, typename... A>
std::function<void()> zero(R (*f)(A...)) {
  return [f] { (void)f(A{}...); };
}

#define OWN(fn)                                           \
  {                                                       \
#fn, { kind::own, BP_ERR_INVALID_ARGUMENT, zero(fn) } \
  }
#define OWN_CODE(fn, code)             \
  {                                    \
#fn, { kind::own, code, zero(fn) } \
  }
#define OK(fn)                         \
  {                                    \
#fn, { kind::ok, BP_OK, zero(fn) } \
  }
#define ANY(fn)                         \
  {                                     \
#fn, { kind::any, BP_OK, zero(fn) } \
  }
#define BUILDER(fn)                                           \
  {                                                           \
#fn, { kind::builder, BP_ERR_INVALID_ARGUMENT, zero(fn) } \
  }
#define NEUTRAL(fn)                         \
  {                                         \
#fn, { kind::neutral, BP_OK, zero(fn) } \
  }
#define SPECIAL(fn)                        \
  {                                        \
#fn, { kind::special, BP_OK, nullptr } \
  }

const std::map<std::string, row> &table() {
  static const std::map<std::string, row> t = {
      // errors, versions, names, logging: neutral
      NEUTRAL(bp_last_error),
      NEUTRAL(bp_last_status),
      NEUTRAL(bp_status_name),
      NEUTRAL(bp_version),
      NEUTRAL(bp_version_string),
      NEUTRAL(bp_op_name),
      NEUTRAL(bp_device_type_name),
      NEUTRAL(bp_log_get_level),
      NEUTRAL(bp_log_set_callback),
      {"bp_log_set_level", {kind::neutral, BP_OK, [] { bp_log_set_level(bp_log_get_level()); }}},
      SPECIAL(bp_clear_error),   // ClearErrorForgetsTheState
      SPECIAL(bp_report_error),  // ReportErrorSetsTheState
      // contexts and tensors
      {"bp_context_new", {kind::ok, BP_OK, [] { bp_context_free(bp_context_new(0)); }}},
      OK(bp_context_free),
      OWN(bp_context_tensor_count),
      OWN(bp_context_tensor),
      OWN(bp_context_find_tensor),
      OWN(bp_quantize_rows),
      OWN(bp_quantize_rows_for_file),
      OWN(bp_dequantize),
      BUILDER(bp_tensor_new),
      BUILDER(bp_tensor_new_1d),
      BUILDER(bp_tensor_new_2d),
      BUILDER(bp_tensor_new_3d),
      BUILDER(bp_tensor_new_4d),
      BUILDER(bp_tensor_set_name),
      BUILDER(bp_tensor_set_flags),
      BUILDER(bp_view_1d),
      BUILDER(bp_view_2d),
      BUILDER(bp_view_3d),
      BUILDER(bp_view_4d),
      BUILDER(bp_reshape),
      BUILDER(bp_reshape_2d),
      BUILDER(bp_reshape_3d),
      BUILDER(bp_reshape_4d),
      BUILDER(bp_permute),
      BUILDER(bp_transpose),
      // ops
      BUILDER(bp_add),
      BUILDER(bp_sub),
      BUILDER(bp_mul),
      BUILDER(bp_div),
      BUILDER(bp_scale),
      BUILDER(bp_clamp),
      BUILDER(bp_unary),
      BUILDER(bp_neg),
      BUILDER(bp_abs),
      BUILDER(bp_sqr),
      BUILDER(bp_sqrt),
      BUILDER(bp_exp),
      BUILDER(bp_relu),
      BUILDER(bp_gelu),
      BUILDER(bp_silu),
      BUILDER(bp_tanh),
      BUILDER(bp_sigmoid),
      BUILDER(bp_sum_rows),
      BUILDER(bp_mean),
      BUILDER(bp_argmax),
      BUILDER(bp_norm),
      BUILDER(bp_rms_norm),
      BUILDER(bp_soft_max),
      BUILDER(bp_mul_mat),
      BUILDER(bp_get_rows),
      BUILDER(bp_cpy),
      BUILDER(bp_cont),
      BUILDER(bp_cast),
      BUILDER(bp_concat),
      BUILDER(bp_rope),
      BUILDER(bp_rope_ext),
      BUILDER(bp_attention),
      BUILDER(bp_set_rows),
      BUILDER(bp_op_new),
      OWN(bp_op_flops),
      OWN(bp_op_bytes),
      // graphs
      OWN(bp_graph_new),
      OK(bp_graph_free),
      OWN(bp_graph_build),  // NULL graph; NULL tensor: ErrorModel tests
      OWN(bp_graph_clear),
      OWN(bp_graph_node_count),
      OWN(bp_graph_node),
      OWN(bp_graph_leaf_count),
      OWN(bp_graph_leaf),
      OWN(bp_graph_validate),
      // registry
      OWN(bp_registry_add_path),
      OWN(bp_registry_load),
      ANY(bp_registry_discover),
      ANY(bp_plugin_count),
      ANY(bp_plugin_get),
      OWN(bp_registry_find_plugin),
      OWN(bp_plugin_name),
      OWN(bp_plugin_version),
      OWN(bp_plugin_path),
      OWN(bp_plugin_description),
      OWN(bp_plugin_param_count),
      OWN(bp_plugin_param),
      OWN(bp_plugin_device_count),
      OWN(bp_plugin_status),
      OWN(bp_plugin_device),
      OWN(bp_plugin_unload),
      ANY(bp_rejected_count),
      ANY(bp_rejected_get),
      ANY(bp_device_count),
      ANY(bp_device_get),
      OWN(bp_device_describe),
      SPECIAL(bp_runtime_shutdown),  // tests/registry/lifecycle_test.cpp (it ends the registry)
      // buffer types and buffers
      OWN(bp_buffer_type_name),
      OWN(bp_buffer_type_alloc),
      OWN(bp_buffer_type_alignment),
      OWN(bp_buffer_type_max_size),
      OWN(bp_buffer_type_alloc_size),
      OWN(bp_buffer_type_is_host),
      OWN(bp_buffer_type_device),
      OWN(bp_device_buffer_type),
      OWN(bp_device_host_buffer_type),
      OWN(bp_device_weight_buffer_type),
      OWN(bp_device_buffer_from_host_ptr),
      OK(bp_buffer_free),
      OWN(bp_buffer_size),
      OWN(bp_buffer_base),
      OWN(bp_buffer_buffer_type),
      OWN(bp_buffer_is_host),
      OWN(bp_buffer_clear),
      OWN(bp_buffer_set_usage),
      OWN(bp_buffer_get_usage),
      OWN(bp_buffer_place_tensor),
      OWN(bp_tensor_set),
      OWN(bp_tensor_get),
      OWN(bp_tensor_memset),
      OWN(bp_tensor_copy),
      // backends and events
      OWN(bp_backend_new),
      OWN(bp_backend_new_list),
      OWN(bp_backend_new_on_device),
      OK(bp_backend_free),
      OWN(bp_backend_name),
      OWN(bp_backend_device),
      OWN(bp_backend_buffer_type),
      OWN(bp_backend_alloc_buffer),
      OWN(bp_backend_alignment),
      OWN(bp_backend_graph_compute),
      OWN(bp_backend_graph_compute_async),
      OWN(bp_backend_synchronize),
      OWN(bp_graph_plan_new),
      OWN(bp_graph_plan_compute_async),
      OK(bp_graph_plan_free),
      OWN(bp_backend_supports_op),
      OWN(bp_backend_supports_buft),
      OWN(bp_backend_offload_op),
      OWN(bp_backend_tensor_set_async),
      OWN(bp_backend_tensor_get_async),
      OWN(bp_event_new),
      OK(bp_event_free),
      OWN(bp_event_record),
      OWN(bp_backend_wait_event),
      OWN(bp_event_synchronize),
      // allocation
      OWN(bp_tallocr_new),
      OWN(bp_tallocr_alloc),
      OWN(bp_context_alloc_tensors_from_buft),
      OWN(bp_context_alloc_tensors),
      OWN(bp_gallocr_new),
      OK(bp_gallocr_free),
      OWN(bp_gallocr_reserve),
      OWN(bp_gallocr_alloc_graph),
      OWN(bp_gallocr_buffer_size),
      // scheduler
      OWN(bp_sched_new),
      OK(bp_sched_free),
      OWN(bp_sched_reserve),
      OWN(bp_sched_backend_count),
      OWN(bp_sched_backend),
      OWN(bp_sched_split_count),
      OWN(bp_sched_copy_count),
      OWN(bp_sched_buffer_size),
      OWN(bp_sched_set_tensor_backend),
      OWN(bp_sched_get_tensor_backend),
      OWN(bp_sched_alloc_graph),
      OWN(bp_sched_graph_compute),
      OWN(bp_sched_graph_compute_async),
      OWN(bp_sched_synchronize),
      OWN(bp_sched_reset),
      OWN(bp_sched_set_eval_callback),
      OWN(bp_sched_set_graph_plans),
      OWN(bp_sched_split_describe),
      OWN(bp_sched_get_tensor_backend),
  };
  return t;
}

std::string read_file(const std::filesystem::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::filesystem::path k_root = std::filesystem::path(BP_TEST_SOURCE_DIR).parent_path();

// The current API. The deprecated 0.1 names (deprecated.h, which
// backplane.h includes) only forward (deprecated_names_test covers them).
std::set<std::string> header_functions() {
  const std::string h = read_file(k_root / "include/backplane/backplane.h");
  std::set<std::string> names;
  const std::regex decl(R"(\nBP_API[^;(]*?\b(bp_\w+)\s*\()");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), decl); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

// Thin variants report under the name of the function they forward to.
std::string message_name(const std::string &fn) {
  static const std::map<std::string, std::string> alias = {
      {"bp_tensor_new_1d", "bp_tensor_new"}, {"bp_tensor_new_2d", "bp_tensor_new"},
      {"bp_tensor_new_3d", "bp_tensor_new"}, {"bp_tensor_new_4d", "bp_tensor_new"},
      {"bp_reshape_2d", "bp_reshape"},       {"bp_reshape_3d", "bp_reshape"},
      {"bp_reshape_4d", "bp_reshape"},       {"bp_context_alloc_tensors_from_buft", "bp_context_alloc_tensors"},
  };
  const auto it = alias.find(fn);
  return it == alias.end() ? fn : it->second;
}

// A failure with a message no function makes, as "the previous call".
const char *k_sentinel = "sentinel-plugin-that-does-not-exist";
void fail_previous_call() {
  bp_backend *be = nullptr;
  ASSERT_NE(bp_backend_new(k_sentinel, &be), BP_OK);
  ASSERT_NE(std::string(bp_last_error()).find(k_sentinel), std::string::npos) << bp_last_error();
}

TEST(NullArgs, EveryHeaderFunctionHasARow) {
  const std::set<std::string> names = header_functions();
  ASSERT_GT(names.size(), 150u) << "the header parse found too few functions";
  std::string missing, extra;
  for (const std::string &n : names)
    if (!table().count(n)) missing += " " + n;
  for (const auto &[n, r] : table())
    if (!names.count(n)) extra += " " + n;
  EXPECT_EQ(missing, "") << "functions of backplane.h without a row in tests/core/null_args_test.cpp";
  EXPECT_EQ(extra, "") << "rows for functions no longer in backplane.h";
}

TEST(NullArgs, EveryFunctionReportsItsOwnOutcome) {
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  for (const auto &[name, r] : table()) {
    if (r.k == kind::special) continue;
    SCOPED_TRACE(name);
    // After a failed call.
    fail_previous_call();
    const bp_status previous = bp_last_status();
    r.call();
    const std::string msg = bp_last_error();
    const bp_status st = bp_last_status();
    switch (r.k) {
      case kind::own:
        EXPECT_EQ(st, r.code) << msg;
        EXPECT_NE(msg.find(message_name(name)), std::string::npos) << "message does not name the function: " << msg;
        break;
      case kind::ok:
        EXPECT_EQ(st, BP_OK) << msg;
        EXPECT_EQ(msg, "");
        break;
      case kind::any:
        EXPECT_EQ(msg.find(k_sentinel), std::string::npos) << "stale message: " << msg;
        EXPECT_EQ(st == BP_OK, msg.empty()) << msg;
        break;
      case kind::builder:
        EXPECT_EQ(st, previous) << msg;
        EXPECT_NE(msg.find(k_sentinel), std::string::npos) << "the NULL did not carry the failure: " << msg;
        break;
      case kind::neutral:
        EXPECT_EQ(st, previous);
        EXPECT_NE(msg.find(k_sentinel), std::string::npos) << msg;
        break;
      case kind::special:
        break;
    }
    // After a call that succeeded: builders name their own NULL argument.
    bp_context_free(nullptr);
    ASSERT_EQ(bp_last_status(), BP_OK);
    r.call();
    if (r.k == kind::builder) {
      EXPECT_EQ(bp_last_status(), r.code) << bp_last_error();
      EXPECT_NE(std::string(bp_last_error()).find(message_name(name)), std::string::npos) << bp_last_error();
      EXPECT_NE(std::string(bp_last_error()).find("is NULL"), std::string::npos) << bp_last_error();
    }
  }
}

TEST(NullArgs, ClearErrorForgetsTheState) {
  fail_previous_call();
  bp_clear_error();
  EXPECT_EQ(bp_last_status(), BP_OK);
  EXPECT_STREQ(bp_last_error(), "");
}

TEST(NullArgs, ReportErrorSetsTheState) {
  EXPECT_EQ(bp_report_error(BP_ERR_UNIMPLEMENTED, "from a layer above"), BP_ERR_UNIMPLEMENTED);
  EXPECT_EQ(bp_last_status(), BP_ERR_UNIMPLEMENTED);
  EXPECT_STREQ(bp_last_error(), "from a layer above");
  EXPECT_EQ(bp_report_error(BP_ERR_INVALID_ARGUMENT, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(bp_last_error(), "");
  EXPECT_EQ(bp_report_error(9999, "out of range"), BP_ERR_INTERNAL);  // not a status: recorded as INTERNAL
  EXPECT_EQ(bp_last_status(), BP_ERR_INTERNAL);
  EXPECT_EQ(bp_report_error(BP_OK, "ignored"), BP_OK);
  EXPECT_EQ(bp_last_status(), BP_OK);
  EXPECT_STREQ(bp_last_error(), "");
}

// The mechanism: every definition of a header function in core/ and
// registry/ opens the API scope first thing (BP_API_SCOPE, or api_guard /
// api_guard_ptr / build_guard, which open one), except the neutral ones.
TEST(NullArgs, EveryDefinitionOpensTheApiScope) {
  const std::set<std::string> names = header_functions();
  std::map<std::string, bool> scoped;
  for (const char *dir : {"core", "registry"}) {
    for (const auto &e : std::filesystem::recursive_directory_iterator(k_root / dir)) {
      if (e.path().extension() != ".cpp") continue;
      const std::string s = read_file(e.path());
      const std::regex def(R"(\n(?:BP_API )?[A-Za-z_][\w ]*?[\s*]+(bp_\w+)\(([^;{]*?)\)\s*\{)");
      for (auto it = std::sregex_iterator(s.begin(), s.end(), def); it != std::sregex_iterator(); ++it) {
        const std::string n = (*it)[1];
        if (!names.count(n)) continue;
        size_t i = (size_t)(it->position() + it->length()), depth = 1;
        const size_t start = i;
        while (i < s.size() && depth > 0) depth += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0, ++i;
        const std::string body = s.substr(start, i - start);
        scoped[n] = body.find("BP_API_SCOPE()") != std::string::npos || body.find("api_guard") != std::string::npos ||
                    body.find("build_guard") != std::string::npos;
      }
    }
  }
  std::string unscoped, undefined;
  for (const std::string &n : names) {
    const auto it = table().find(n);
    if (it != table().end() && it->second.k == kind::neutral) continue;
    if (n == "bp_clear_error" || n == "bp_report_error") continue;  // they set the state themselves
    if (!scoped.count(n))
      undefined += " " + n;
    else if (!scoped[n])
      unscoped += " " + n;
  }
  EXPECT_EQ(unscoped, "") << "public functions that do not open the API scope (clear-on-success rule)";
  EXPECT_EQ(undefined, "") << "public functions whose definition this test could not find";
}

}  // namespace
