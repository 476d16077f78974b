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
  check_mul_mat_bf16_window(be_, 8, 9, 0, 7, 2);
  check_mul_mat_bf16_window(be_, 35, 40, 3, 7, 3);
  check_get_rows(be_, BP_TYPE_BF16, 37, 5, 7);
}

INSTANTIATE_TEST_SUITE_P(Types, OpenclQuant, ::testing::ValuesIn(kQuantTypes),
                         [](const ::testing::TestParamInfo<bp_type> &i) { return std::string(bp_type_name(i.param)); });

}  // namespace
