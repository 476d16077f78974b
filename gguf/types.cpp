// types.cpp: Backplane's types and the file format's type ids, both ways.
#include <cstdint>

#include "core/enum_value.hpp"
#include "gguf/internal.hpp"

namespace bp::gguf {

namespace {

struct pair {
  bp_type type;
  uint32_t file_type;
};

// Every Backplane type with its id in the file format.
const pair kPairs[] = {
    {BP_TYPE_F32, 0},     {BP_TYPE_F16, 1},    {BP_TYPE_I32, 26},  {BP_TYPE_Q8_0, 8},  {BP_TYPE_Q4_0, 2},
    {BP_TYPE_Q5_0, 6},    {BP_TYPE_Q4_K, 12},  {BP_TYPE_Q6_K, 14}, {BP_TYPE_Q5_K, 13}, {BP_TYPE_BF16, 30},
    {BP_TYPE_Q4_1, 3},    {BP_TYPE_Q5_1, 7},   {BP_TYPE_Q2_K, 10}, {BP_TYPE_Q3_K, 11}, {BP_TYPE_IQ4_NL, 20},
    {BP_TYPE_IQ4_XS, 23}, {BP_TYPE_MXFP4, 39},
};
static_assert(sizeof kPairs / sizeof kPairs[0] == BP_TYPE_COUNT, "every bp_type needs its GGUF id here");

}  // namespace

bool backplane_type_of(uint32_t file_type, bp_type *out) {
  for (const pair &p : kPairs) {
    if (p.file_type == file_type) {
      *out = p.type;
      return true;
    }
  }
  return false;
}

}  // namespace bp::gguf

extern "C" BP_API uint32_t bp_gguf_file_type_of(bp_type type) {
  BP_API_SCOPE();
  const int raw = bp::core::enum_value(type);  // callers may pass any number
  for (const auto &p : bp::gguf::kPairs) {
    if (static_cast<int>(p.type) == raw) return p.file_type;
  }
  return UINT32_MAX;
}
