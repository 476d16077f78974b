// quant_test.cpp: quantized weights on the vulkan plugin through the public
// API, each block type and BF16: MUL_MAT by f32 columns (one column, a few, more
// than one column block of 8, batches broadcasting a's; K of 1, 2 and 7
// blocks; odd M and N) on the device's own choice of shaders and on the
// GPU-shaped ones forced by mul_mat=gpu (lavapipe is a CPU-type device), and
// GET_ROWS, each against a double-precision reference on the weights as
// bp_dequantize decodes them. The profile names the shader that ran.
// Skipped without a Vulkan device. On a GPU: ctest -R Vulkan.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <string>

#include "plugins/quant_check.hpp"
#include "support/find.hpp"

using namespace bp_quant_test;

namespace {

class VulkanQuant : public ::testing::TestWithParam<bp_type> {
 protected:
  void SetUp() override {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    bp_plugin *p = bp_test::find_plugin("vulkan");
    if (!p || bp_plugin_device_count(p) == 0) GTEST_SKIP() << "no Vulkan device";
  }
  bp_backend *make(const std::string &params) {
    bp_backend *be = nullptr;
    const std::string spec = "vulkan:0,profile=true" + (params.empty() ? "" : "," + params);
    EXPECT_EQ(bp_backend_new(spec.c_str(), &be), BP_OK) << spec << ": " << bp_last_error();
    return be;
  }
  // The MUL_MAT rows of the profile all name a variant of |prefix| for this
  // test's type ("mul_mv_q_q8_0", ...); at least one ran.
  void expect_variants(const std::map<std::string, int> &rows, const std::string &prefix) {
    std::string suffix = std::string("_") + bp_type_name(GetParam());  // variants are lower case: "_q4_k"
    for (char &ch : suffix) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    int ran = 0;
    std::string all;
    for (const auto &[k, n] : rows) {
      all += "\n  " + k + ": " + std::to_string(n);
      if (k.rfind("MUL_MAT ", 0) != 0) continue;
      const std::string v = k.substr(8);
      const bool ok = v.rfind(prefix, 0) == 0 && v.size() > suffix.size() &&
                      v.compare(v.size() - suffix.size(), suffix.size(), suffix) == 0;
      EXPECT_TRUE(ok) << "MUL_MAT ran " << v << ", not " << prefix << "*" << suffix;
      ran += n;
    }
    EXPECT_GT(ran, 0) << "no MUL_MAT dispatch in the profile:" << all;
  }
};

TEST_P(VulkanQuant, MulMatMatchesDoubleReference) {
  const bp_type t = GetParam();
  const int64_t qk = row_unit(t);
  profile_capture profile;
  bp_backend *be = make("");
  ASSERT_NE(be, nullptr);
  check_mul_mat(be, t, qk, 37, 1);        // one block, odd M, a vector
  check_mul_mat(be, t, 2 * qk, 5, 3);     // two blocks, a few columns
  check_mul_mat(be, t, 7 * qk, 19, 13);   // 7 blocks, a column block of 8 and a tail of 5
  check_mul_mat(be, t, 2 * qk, 9, 2, 4);  // batches, two of b's per a's
  bp_backend_free(be);
  // The device's own choice: mul_mv_q on CPU-type devices and for these
  // narrow products on GPUs too.
  expect_variants(profile.rows(), "mul_mv_q");
}

TEST_P(VulkanQuant, GpuShapedMulMatMatchesDoubleReference) {
  const bp_type t = GetParam();
  const int64_t qk = row_unit(t);
  {
    profile_capture profile;
    bp_backend *be = make("mul_mat=gpu");
    ASSERT_NE(be, nullptr);
    check_mul_mat(be, t, 7 * qk, 70, 33, 2);  // 64 blocks with M and N past the edge, batches
    check_mul_mat(be, t, qk, 130, 65);        // one block of k, a K tail inside the slice
    bp_backend_free(be);
    expect_variants(profile.rows(), "mul_mat_shared_");
  }
  {
    // Matrix x vector with the workgroup of 4 subgroups reduced through
    // shared memory.
    profile_capture profile;
    bp_backend *be = make("mul_mat=gpu");
    ASSERT_NE(be, nullptr);
    check_mul_mat(be, t, 7 * qk, 41, 1);
    check_mul_mat(be, t, 2 * qk, 33, 7, 2);
    bp_backend_free(be);
    expect_variants(profile.rows(), "mul_mv_q");
  }
}

TEST_P(VulkanQuant, GetRowsMatchesDoubleReference) {
  const bp_type t = GetParam();
  const int64_t qk = row_unit(t);
  bp_backend *be = make("");
  ASSERT_NE(be, nullptr);
  check_get_rows(be, t, qk, 5, 7);
  check_get_rows(be, t, 3 * qk, 40, 17);
  bp_backend_free(be);
}

// BF16 rows the decoders do not take (a length not a multiple of 4, or a
// row off a 4-byte word) run through mul_mat_bf16 and get_rows_bf16_any;
// rows of whole blocks on a word through the block shaders.
class VulkanBf16 : public VulkanQuant {};

TEST_F(VulkanBf16, RowsOfAnyLengthMatchDoubleReference) {
  profile_capture profile;
  bp_backend *be = make("");
  ASSERT_NE(be, nullptr);
  check_mul_mat(be, BP_TYPE_BF16, 37, 9, 3);
  check_mul_mat(be, BP_TYPE_BF16, 38, 5, 1, 2);
  check_mul_mat(be, BP_TYPE_BF16, 8, 7, 2, 1, 9, 0);   // rows 18 bytes apart: every other one off a word
  check_mul_mat(be, BP_TYPE_BF16, 8, 7, 3, 1, 10, 1);  // every row starts 2 bytes past a word
  check_get_rows(be, BP_TYPE_BF16, 37, 5, 7);
  bp_backend_free(be);
  const auto rows = profile.rows();
  EXPECT_GT(rows.count("MUL_MAT mul_mat_bf16"), 0u);
  EXPECT_GT(rows.count("GET_ROWS get_rows_bf16_any"), 0u);
  for (const auto &[k, n] : rows)
    EXPECT_TRUE(k.find("_q_") == std::string::npos && k != "GET_ROWS get_rows_bf16") << k << " ran a block shader";
}

TEST_F(VulkanBf16, WindowsOnWordsRunTheBlockShaders) {
  profile_capture profile;
  bp_backend *be = make("");
  ASSERT_NE(be, nullptr);
  check_mul_mat(be, BP_TYPE_BF16, 8, 7, 3, 1, 12, 2);  // rows 24 bytes apart, the window 4 bytes in
  bp_backend_free(be);
  EXPECT_GT(profile.rows().count("MUL_MAT mul_mv_q_tex_bf16") + profile.rows().count("MUL_MAT mul_mv_q_bf16"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanQuant, ::testing::ValuesIn(kQuantTypes),
                         [](const ::testing::TestParamInfo<bp_type> &i) { return std::string(bp_type_name(i.param)); });

}  // namespace
