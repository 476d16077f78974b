// conformance_test.cpp: conformance cases (tools/conformance) on the cpu
// backend, one test per case: a subset on cpu:threads=1 and cpu:threads=3
// (every case on the default backend is ctest's Conformance.cpu.*) so that the split of rows between threads is crossed
// at odd places. Plus tests of the conformance machinery itself: the comparison must catch wrong results, so the suite
// can fail.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "conformance/conformance.hpp"

namespace conf = bp::conformance;

namespace {

const std::vector<conf::case_desc> &all_cases() {
  static const std::vector<conf::case_desc> cases = conf::conformance_cases();
  return cases;
}

// One backend per spec for the whole binary (creating one per case would
// test thread pool start-up, not the ops). Freed by BackendCache's TearDown,
// after the last test and before static destruction, so LeakSanitizer checks
// the backends' own cleanup too.
std::map<std::string, bp_backend *> &cached_backends() {
  static std::map<std::string, bp_backend *> backends;
  return backends;
}

class BackendCache : public ::testing::Environment {
 public:
  void TearDown() override {
    for (auto &[spec, be] : cached_backends())
      if (be) bp_backend_free(be);
    cached_backends().clear();
  }
};
[[maybe_unused]] ::testing::Environment *const backend_cache = ::testing::AddGlobalTestEnvironment(new BackendCache);

bp_backend *backend_for(const std::string &spec, std::string &error) {
  auto &backends = cached_backends();
  static std::map<std::string, std::string> errors;
  if (auto it = backends.find(spec); it != backends.end()) {
    error = errors[spec];
    return it->second;
  }
  static const bool path_added = [] {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    return true;
  }();
  (void)path_added;
  bp_backend *be = nullptr;
  if (bp_backend_new(spec.c_str(), &be) != BP_OK) {
    errors[spec] = bp_last_error();
    be = nullptr;
  }
  backends[spec] = be;
  error = errors[spec];
  return be;
}

struct op_case_param {
  size_t index;
  std::string spec;
};

std::string test_name(const op_case_param &p) {
  std::string s = all_cases()[p.index].name + "_" + p.spec;
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  // Collapse runs of '_' so the names stay readable.
  std::string collapsed;
  for (char ch : out)
    if (!(ch == '_' && !collapsed.empty() && collapsed.back() == '_')) collapsed += ch;
  return collapsed + "_" + std::to_string(p.index);
}

std::vector<op_case_param> params_for(const std::string &spec, size_t every) {
  std::vector<op_case_param> out;
  for (size_t i = 0; i < all_cases().size(); i += every) out.push_back({i, spec});
  return out;
}

// Readable parameter in --gtest_list_tests and failure output.
void PrintTo(const op_case_param &p, std::ostream *os) { *os << "[" << p.spec << "] " << all_cases()[p.index].name; }

class CpuOps : public ::testing::TestWithParam<op_case_param> {};

TEST_P(CpuOps, MatchesReference) {
  const op_case_param &p = GetParam();
  const conf::case_desc &c = all_cases()[p.index];
  std::string error;
  bp_backend *be = backend_for(p.spec, error);
  ASSERT_NE(be, nullptr) << "cannot create backend '" << p.spec << "': " << error;
  const conf::case_result r = conf::run_case(c, be);
  // Features the cpu backend has no kernels for yet (as OPTIONAL_FEATURES of
  // Conformance.cpu.* in tests/CMakeLists.txt); empty it once it has them.
  const std::set<std::string> optional_features = {"quant"};
  if (r.status == conf::case_status::unsupported && optional_features.count(c.feature))
    GTEST_SKIP() << c.name << ": " << r.message;
  // The cpu backend implements every op: "not supported" is a failure here.
  EXPECT_EQ(r.status, conf::case_status::passed)
      << "[" << p.spec << "] " << c.name << ": " << conf::case_status_name(r.status) << ", nmse " << r.nmse
      << " (max " << r.max_nmse << "): " << r.message;
}

// Every case on the default cpu backend is ctest's Conformance.cpu.* (each
// ISA path, tests/CMakeLists.txt); here only the thread counts it does not
// run, on a share of the cases.
INSTANTIATE_TEST_SUITE_P(CpuThreads1, CpuOps, ::testing::ValuesIn(params_for("cpu:threads=1", 5)),
                         [](const auto &info) { return test_name(info.param); });
INSTANTIATE_TEST_SUITE_P(CpuThreads3, CpuOps, ::testing::ValuesIn(params_for("cpu:threads=3", 3)),
                         [](const auto &info) { return test_name(info.param); });

// ---------------------------------------------------------------------------
// The machinery.

conf::expected vec(std::vector<double> v, bp_type type = BP_TYPE_F32) {
  conf::expected e;
  e.type = type;
  e.ne[0] = static_cast<int64_t>(v.size());
  e.values = std::move(v);
  return e;
}

TEST(ConformanceCompare, AcceptsEqualAndCatchesWrongValues) {
  const conf::expected want = vec({1, -2, 3, 4});
  EXPECT_TRUE(conf::compare_values({1, -2, 3, 4}, want, 1e-7, false).ok);
  const conf::comparison bad = conf::compare_values({1, -2, 3.1, 4}, want, 1e-7, false);
  EXPECT_FALSE(bad.ok);
  EXPECT_NEAR(bad.nmse, 0.01 / 30.0, 1e-12);
  EXPECT_NE(bad.message.find("[2,0,0,0]"), std::string::npos) << bad.message;
  // A sign flip of everything is as wrong as it gets.
  EXPECT_FALSE(conf::compare_values({-1, 2, -3, -4}, want, 1e-3, false).ok);
}

TEST(ConformanceCompare, NonFiniteValuesMustMatch) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_FALSE(conf::compare_values({1, nan}, vec({1, 2}), 1, false).ok);
  EXPECT_FALSE(conf::compare_values({1, 2}, vec({1, inf}), 1, false).ok);
  EXPECT_FALSE(conf::compare_values({1, -inf}, vec({1, inf}), 1, false).ok);
  EXPECT_TRUE(conf::compare_values({1, inf, nan}, vec({1, inf, nan}), 1e-7, false).ok);
}

TEST(ConformanceCompare, AllZeroReferenceUsesAbsoluteError) {
  EXPECT_TRUE(conf::compare_values({0, 0, 0}, vec({0, 0, 0}), 1e-7, false).ok);
  EXPECT_FALSE(conf::compare_values({0, 1e-3, 0}, vec({0, 0, 0}), 1e-7, false).ok);
}

TEST(ConformanceCompare, ExactModeCatchesOneOff) {
  const conf::comparison c = conf::compare_values({3, 1, 4}, vec({3, 1, 5}, BP_TYPE_I32), 1.0, true);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.message.find("1 of 3"), std::string::npos) << c.message;
  EXPECT_FALSE(conf::compare_values({3, 1}, vec({3, 1, 5}), 1.0, false).ok) << "size mismatch";
}

TEST(ConformanceHost, ViewsGiveHandComputedLayouts) {
  conf::input_spec in;
  in.ne[0] = 4;
  in.ne[1] = 3;
  in.ne[2] = 2;
  in.views.push_back({conf::view_step::kind::permute, {1, 2, 0, 3}, {}, {}, 0});
  conf::host_layout l = conf::apply_views_on_host(in);
  // Leaf dims (4,3,2) with strides (1,4,12) move to dims (1,2,0).
  EXPECT_EQ(l.ne[0], 2);
  EXPECT_EQ(l.ne[1], 4);
  EXPECT_EQ(l.ne[2], 3);
  EXPECT_EQ(l.stride[0], 12);
  EXPECT_EQ(l.stride[1], 1);
  EXPECT_EQ(l.stride[2], 4);
  in.views.push_back({conf::view_step::kind::transpose, {}, {}, {}, 0});
  l = conf::apply_views_on_host(in);
  EXPECT_EQ(l.ne[0], 4);
  EXPECT_EQ(l.stride[0], 1);
  EXPECT_EQ(l.stride[1], 12);
}

TEST(ConformanceHost, FillsAreSeededAndInRange) {
  conf::input_spec in;
  in.ne[0] = 257;
  in.ne[1] = 7;
  in.fill = {conf::fill_kind::integers, 2, 5};
  const auto a = conf::make_leaf_values(in, 1), b = conf::make_leaf_values(in, 1), c = conf::make_leaf_values(in, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (double x : a) {
    EXPECT_GE(x, 2);
    EXPECT_LE(x, 5);
    EXPECT_EQ(x, std::floor(x));
  }
  in.fill = {conf::fill_kind::distinct, -8, 8};
  const auto d = conf::make_leaf_values(in, 3);
  EXPECT_EQ(std::set<double>(d.begin(), d.end()).size(), d.size()) << "ties in a distinct fill";
  in.type = BP_TYPE_F16;
  in.fill = {conf::fill_kind::uniform, -1, 1};
  for (double x : conf::make_leaf_values(in, 4)) EXPECT_EQ(x, conf::round_to_type(x, BP_TYPE_F16));
}

TEST(ConformanceCases, EveryOpHasCasesAndNamesAreUnique) {
  std::set<std::string> names;
  std::map<std::string, int> per_op;
  for (const auto &c : all_cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
    ++per_op[c.op];
    EXPECT_TRUE(c.build && c.reference) << c.name;
  }
  for (const auto &op : conf::conformance_ops()) EXPECT_GE(per_op[op], 5) << op;
  EXPECT_EQ(conf::conformance_cases({"ROPE"}).size(), static_cast<size_t>(per_op["ROPE"]));
}

// A case whose reference is deliberately wrong must fail on a correct backend.
TEST(ConformanceRunner, WrongReferenceFails) {
  std::string error;
  bp_backend *be = backend_for("cpu", error);
  ASSERT_NE(be, nullptr) << error;
  conf::case_desc c = conf::conformance_cases({"ADD"}).at(2);
  const conf::reference_fn right = c.reference;
  c.reference = [right](const std::vector<conf::host_input> &in, const conf::op_args &a) {
    conf::expected e = right(in, a);
    e.values[e.values.size() / 2] += 1.0;
    return e;
  };
  const conf::case_result r = conf::run_case(c, be);
  EXPECT_EQ(r.status, conf::case_status::failed) << r.message;
  EXPECT_GT(r.nmse, c.max_nmse);
}

// The wrong op computed for a reference must fail too (SUB checked as ADD).
TEST(ConformanceRunner, WrongOpFails) {
  std::string error;
  bp_backend *be = backend_for("cpu", error);
  ASSERT_NE(be, nullptr) << error;
  conf::case_desc c = conf::conformance_cases({"ADD"}).at(3);
  c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const conf::op_args &) {
    return bp_sub(ctx, in[0], in[1]);
  };
  EXPECT_EQ(conf::run_case(c, be).status, conf::case_status::failed);
}

// Bad graphs and a missing backend are failed results with a message, not crashes.
TEST(ConformanceRunner, ApiFailuresBecomeFailedResults) {
  std::string error;
  bp_backend *be = backend_for("cpu", error);
  ASSERT_NE(be, nullptr) << error;
  conf::case_desc c = conf::conformance_cases({"MUL_MAT"}).at(2);
  c.inputs[1].ne[0] += 1;  // inner dims no longer match
  const conf::case_result r = conf::run_case(c, be);
  EXPECT_EQ(r.status, conf::case_status::failed);
  EXPECT_NE(r.message.find("bp_mul_mat"), std::string::npos) << r.message;
  EXPECT_EQ(conf::run_case(c, nullptr).status, conf::case_status::failed);
}

// GET_ROWS ids are data: an id outside 0..R-1 must fail the compute with
// INVALID_ARGUMENT naming it (docs/ops.md), never read out of bounds.
TEST(CpuOpsErrors, GetRowsBadIdFailsTheCompute) {
  std::string error;
  bp_backend *be = backend_for("cpu", error);
  ASSERT_NE(be, nullptr) << error;
  for (int32_t bad : {3, -1, 1 << 30}) {
    bp_context *ctx = bp_context_new(0);
    bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
    bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, 2);
    bp_tensor *rows = bp_get_rows(ctx, a, ids);
    ASSERT_NE(rows, nullptr) << bp_last_error();
    bp_graph *g = bp_graph_new(ctx, 0);
    ASSERT_EQ(bp_graph_build(g, rows), BP_OK) << bp_last_error();
    bp_buffer *buf = nullptr;
    ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
    const float av[12] = {};
    const int32_t iv[2] = {0, bad};
    ASSERT_EQ(bp_tensor_set(a, av, 0, sizeof av), BP_OK);
    ASSERT_EQ(bp_tensor_set(ids, iv, 0, sizeof iv), BP_OK);
    EXPECT_EQ(bp_backend_graph_compute(be, g), BP_ERR_INVALID_ARGUMENT) << "id " << bad;
    EXPECT_NE(std::string(bp_last_error()).find(std::to_string(bad)), std::string::npos)
        << "the message should name the id " << bad << ": " << bp_last_error();
    bp_buffer_free(buf);
    bp_graph_free(g);
    bp_context_free(ctx);
  }
}

}  // namespace
