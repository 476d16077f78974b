// ops.cpp: which kernel computes which op (the cpu plugin's op table).
#include "kernels.hpp"
#include "op_family.hpp"
#include "repack.hpp"

namespace bp::cpu {
namespace {

const op_kernel kBinary = {binary_supports, nullptr, binary_run, nullptr};
const op_kernel kUnary = {unary_supports, nullptr, unary_run, nullptr};
const op_kernel kReduce = {reduce_supports, nullptr, reduce_run, nullptr};
const op_kernel kSoftMax = {soft_max_supports, nullptr, soft_max_run, nullptr};
const op_kernel kMulMat = {mul_mat_supports, nullptr, mul_mat_run, mul_mat_work};
const op_kernel kGetRows = {get_rows_supports, get_rows_prepare, get_rows_run, nullptr};
const op_kernel kCopy = {copy_supports, nullptr, copy_run, nullptr};
const op_kernel kConcat = {concat_supports, nullptr, concat_run, nullptr};
const op_kernel kRope = {rope_supports, nullptr, rope_run, nullptr};
const op_kernel kAttention = {attention_supports, nullptr, attention_run, attention_work};
const op_kernel kSetRows = {set_rows_supports, set_rows_prepare, set_rows_run, set_rows_work};

}  // namespace

const op_kernel *find_kernel(bp_op op) {
  switch (plugins::family_of(op)) {
    case plugins::op_family::binary:
    case plugins::op_family::scalar:
      return &kBinary;
    case plugins::op_family::unary:
      return &kUnary;
    case plugins::op_family::row_reduce:
      return &kReduce;
    case plugins::op_family::other:
      break;
  }
  switch (op) {
    case BP_OP_SOFT_MAX:
      return &kSoftMax;
    case BP_OP_MUL_MAT:
      return &kMulMat;
    case BP_OP_GET_ROWS:
      return &kGetRows;
    case BP_OP_CPY:
    case BP_OP_CONT:
      return &kCopy;
    case BP_OP_CONCAT:
      return &kConcat;
    case BP_OP_ROPE:
      return &kRope;
    case BP_OP_ATTENTION:
      return &kAttention;
    case BP_OP_SET_ROWS:
      return &kSetRows;
    default:
      return nullptr;
  }
}

}  // namespace bp::cpu

namespace bp::cpu {

bool node_supported(const bp_tensor *t) {
  if (!t) return false;
  // Quantized tensors: MUL_MAT's a, GET_ROWS's table, the destination of
  // CPY and CONT (quant.hpp); those kernels' supports() check the rest.
  if (plugins::touches_quantized(t) && t->op != BP_OP_MUL_MAT && t->op != BP_OP_GET_ROWS && t->op != BP_OP_CPY &&
      t->op != BP_OP_CONT)
    return false;
  // Repacked weights (repack.hpp): only MUL_MAT reads them, as its a.
  for (int i = 0; i < BP_MAX_SRC; ++i)
    if (t->src[i] && is_repacked(t->src[i]) && !(t->op == BP_OP_MUL_MAT && i == 0)) return false;
  const op_kernel *k = find_kernel(t->op);
  if (!k) return false;
  for (int i = 0; i < plugins::n_sources(t->op); ++i)
    if (!t->src[i]) return false;
  return k->supports(t);
}

}  // namespace bp::cpu
