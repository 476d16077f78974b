// op_family.hpp: the families of ops the plugins run alike, one list for
// all of them (each used to spell the same case labels out), and the ops'
// names for messages.
#ifndef BP_PLUGINS_COMMON_OP_FAMILY_HPP_
#define BP_PLUGINS_COMMON_OP_FAMILY_HPP_

#include "backplane/plugin.h"

namespace bp::plugins {

enum class op_family {
  other,       // every op with a shape of its own (MUL_MAT, SOFT_MAX, ROPE, ...)
  binary,      // ADD SUB MUL DIV: a op b, b broadcast over a
  scalar,      // SCALE CLAMP: a and float parameters
  unary,       // NEG ABS SQR SQRT EXP RELU GELU SILU TANH SIGMOID
  row_reduce,  // SUM_ROWS MEAN ARGMAX NORM RMS_NORM: one pass over each row
};

constexpr op_family family_of(bp_op op) {
  switch (op) {
    case BP_OP_ADD:
    case BP_OP_SUB:
    case BP_OP_MUL:
    case BP_OP_DIV:
      return op_family::binary;
    case BP_OP_SCALE:
    case BP_OP_CLAMP:
      return op_family::scalar;
    case BP_OP_NEG:
    case BP_OP_ABS:
    case BP_OP_SQR:
    case BP_OP_SQRT:
    case BP_OP_EXP:
    case BP_OP_RELU:
    case BP_OP_GELU:
    case BP_OP_SILU:
    case BP_OP_TANH:
    case BP_OP_SIGMOID:
      return op_family::unary;
    case BP_OP_SUM_ROWS:
    case BP_OP_MEAN:
    case BP_OP_ARGMAX:
    case BP_OP_NORM:
    case BP_OP_RMS_NORM:
      return op_family::row_reduce;
    default:
      return op_family::other;
  }
}

// Sources the op reads (src[0] .. src[n - 1]); the rest are NULL or optional
// (SOFT_MAX's mask).
constexpr int n_sources(bp_op op) {
  switch (op) {
    case BP_OP_ADD:
    case BP_OP_SUB:
    case BP_OP_MUL:
    case BP_OP_DIV:
    case BP_OP_MUL_MAT:
    case BP_OP_GET_ROWS:
    case BP_OP_CONCAT:
    case BP_OP_ROPE:
      return 2;
    case BP_OP_ATTENTION:
    case BP_OP_SET_ROWS:
      return 3;
    default:
      return 1;
  }
}

// The op's name for messages, as bp_op_name spells it (a plugin links
// nothing of the core); "?" outside the enum.
inline const char *op_name(bp_op op) {
  static const char *const names[] = {"NONE",     "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "ADD",      "SUB",
                                      "MUL",      "DIV",  "SCALE",   "CLAMP",   "NEG",       "ABS",      "SQR",
                                      "SQRT",     "EXP",  "RELU",    "GELU",    "SILU",      "TANH",     "SIGMOID",
                                      "SUM_ROWS", "MEAN", "ARGMAX",  "NORM",    "RMS_NORM",  "SOFT_MAX", "MUL_MAT",
                                      "GET_ROWS", "CPY",  "CONT",    "CONCAT",  "ROPE",      "ATTENTION", "SET_ROWS"};
  static_assert(sizeof names / sizeof names[0] == BP_OP_COUNT, "name every bp_op here, in enum order");
  return op >= 0 && op < static_cast<int>(sizeof names / sizeof names[0]) ? names[op] : "?";
}

// True when the node or one of its sources has a quantized type (Q8_0 ..
// Q6_K, Q5_K, BF16: bp_type_is_quantized). A backend without kernels for those types declines such a node in
// supports_op, so the scheduler places it on a backend that has them.
inline bool touches_quantized(const bp_tensor *node) {
  if (!node) return false;
  if (bp_type_is_quantized(node->type)) return true;
  for (int i = 0; i < BP_MAX_SRC; ++i)
    if (node->src[i] && bp_type_is_quantized(node->src[i]->type)) return true;
  return false;
}

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_OP_FAMILY_HPP_
