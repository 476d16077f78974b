// conformance_test.cpp: every op conformance case (tools/conformance: seeded
// inputs, compared with an independent double-precision reference) on every
// OpenCL device, one test per case and device. Skipped without a device.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "conformance/conformance.hpp"
#include "opencl_harness.hpp"

namespace conf = bp::conformance;
using namespace bp_opencl_test;

namespace {

const std::vector<conf::case_desc> &all_cases() {
  static const std::vector<conf::case_desc> cases = conf::conformance_cases();
  return cases;
}

// One backend per device for the whole binary; freed before static
// destruction so LeakSanitizer checks the backend's own cleanup.
std::map<std::string, bp_backend *> &backends() {
  static std::map<std::string, bp_backend *> b;
  return b;
}

class BackendCache : public ::testing::Environment {
 public:
  void TearDown() override {
    for (auto &[spec, be] : backends()) bp_backend_free(be);
    backends().clear();
  }
};
[[maybe_unused]] ::testing::Environment *const backend_cache = ::testing::AddGlobalTestEnvironment(new BackendCache);

bp_backend *backend_for(const std::string &spec) {
  auto it = backends().find(spec);
  if (it != backends().end()) return it->second;
  bp_backend *be = nullptr;
  const std::string full = spec + ",cache_dir=" + test_cache_dir();
  if (bp_backend_init(full.c_str(), &be) != BP_OK) ADD_FAILURE() << "cannot create " << full << ": " << bp_last_error();
  backends()[spec] = be;
  return be;
}

class OpenclOps : public ::testing::TestWithParam<size_t> {};

TEST_P(OpenclOps, MatchesReference) {
  const std::vector<std::string> specs = device_specs();
  if (specs.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
  const conf::case_desc &c = all_cases()[GetParam()];
  for (const std::string &spec : specs) {
    bp_backend *be = backend_for(spec);
    ASSERT_NE(be, nullptr);
    const conf::case_result r = conf::run_case(c, be);
    // The opencl backend implements every op: "not supported" is a failure.
    EXPECT_EQ(r.status, conf::case_status::passed)
        << "[" << spec << "] " << c.name << ": " << conf::case_status_name(r.status) << ", nmse " << r.nmse << " (max "
        << r.max_nmse << "): " << r.message;
  }
}

std::string case_test_name(size_t i) {
  std::string out;
  for (char ch : all_cases()[i].name) {
    char c = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    if (!(c == '_' && !out.empty() && out.back() == '_')) out += c;
  }
  return out + "_" + std::to_string(i);
}

std::vector<size_t> case_indices() {
  std::vector<size_t> v;
  for (size_t i = 0; i < all_cases().size(); ++i) v.push_back(i);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Opencl, OpenclOps, ::testing::ValuesIn(case_indices()),
                         [](const auto &info) { return case_test_name(info.param); });

}  // namespace
