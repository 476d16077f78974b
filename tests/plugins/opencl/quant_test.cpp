// quant_test.cpp: quantized weights on the opencl plugin, each block type
// and BF16:
// MUL_MAT by f32 columns (one column, a few, more than one column block of
// 8, batches broadcasting a's; K of 1, 2 and 7 blocks; odd M and N) and
// GET_ROWS, against a double-precision reference on the weights as
// bp_dequantize decodes them. Skipped without a device.
#include <gtest/gtest.h>

#include <string>

#include "opencl_harness.hpp"
#include "plugins/quant_check.hpp"

using namespace bp_opencl_test;
using namespace bp_quant_test;

namespace {

class OpenclQuant : public ::testing::TestWithParam<bp_type> {
 protected:
  void SetUp() override {
    specs_ = device_specs();
    if (specs_.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
    const std::string spec = specs_[0] + ",cache_dir=" + test_cache_dir();
    ASSERT_EQ(bp_backend_new(spec.c_str(), &be_), BP_OK) << spec << ": " << bp_last_error();
  }
  void TearDown() override {
    if (be_) bp_backend_free(be_);
  }
  std::vector<std::string> specs_;
  bp_backend *be_ = nullptr;
};

class OpenclBf16 : public OpenclQuant {};

TEST_P(OpenclQuant, MulMatMatchesDoubleReference) {
  const bp_type t = GetParam();
  const int64_t qk = row_unit(t);
  check_mul_mat(be_, t, qk, 37, 1);        // one block, odd M, a vector
  check_mul_mat(be_, t, 2 * qk, 5, 3);     // two blocks, a few columns
  check_mul_mat(be_, t, 7 * qk, 19, 13);   // 7 blocks, a column block of 8 and a tail of 5
  check_mul_mat(be_, t, 2 * qk, 9, 2, 4);  // batches, two of b's per a's
}

TEST_P(OpenclQuant, GetRowsMatchesDoubleReference) {
  const bp_type t = GetParam();
  const int64_t qk = row_unit(t);
  check_get_rows(be_, t, qk, 5, 7);
  check_get_rows(be_, t, 3 * qk, 40, 17);
}

// BF16 is a storage type of the f32 kernels: rows of any length, and rows
// off a 4-byte word.
TEST_F(OpenclBf16, RowsOfAnyLengthMatchDoubleReference) {
  check_mul_mat(be_, BP_TYPE_BF16, 37, 9, 3);
  check_mul_mat(be_, BP_TYPE_BF16, 38, 5, 1, 2);
  check_mul_mat(be_, BP_TYPE_BF16, 70, 13, 11);  // past the vector width, with a tail
  check_mul_mat(be_, BP_TYPE_BF16, 8, 7, 2, 1, 9, 0);
  check_mul_mat(be_, BP_TYPE_BF16, 35, 7, 3, 1, 40, 3);
  check_get_rows(be_, BP_TYPE_BF16, 37, 5, 7);
}

// mul_mat_tiled (matmul=tiled; GPUs pick it for 32 columns and more): every
// weight type, F32 and F16 included, with M and N past the 64 x 64 blocks'
// edges, K over several 16-value steps and inside one, batches.
class OpenclTiled : public ::testing::TestWithParam<bp_type> {
 protected:
  void SetUp() override {
    const std::vector<std::string> specs = device_specs();
    if (specs.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
    const std::string spec = specs[0] + ",matmul=tiled,cache_dir=" + test_cache_dir();
    ASSERT_EQ(bp_backend_new(spec.c_str(), &be_), BP_OK) << spec << ": " << bp_last_error();
  }
  void TearDown() override {
    if (be_) bp_backend_free(be_);
  }
  bp_backend *be_ = nullptr;
};

TEST_P(OpenclTiled, MulMatMatchesDoubleReference) {
  const bp_type t = GetParam();
  const int64_t qk = row_unit(t);
  check_mul_mat(be_, t, 7 * qk, 70, 33, 2);  // past the block edges, batches
  check_mul_mat(be_, t, qk, 130, 65);        // k inside one step (or a few)
  check_mul_mat(be_, t, 2 * qk, 5, 1);       // a vector, a sliver of a block
}

INSTANTIATE_TEST_SUITE_P(Types, OpenclTiled,
                         ::testing::Values(BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0,
                                           BP_TYPE_Q4_K, BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16),
                         [](const ::testing::TestParamInfo<bp_type> &i) { return std::string(bp_type_name(i.param)); });

INSTANTIATE_TEST_SUITE_P(Types, OpenclQuant, ::testing::ValuesIn(kQuantTypes),
                         [](const ::testing::TestParamInfo<bp_type> &i) { return std::string(bp_type_name(i.param)); });

}  // namespace
