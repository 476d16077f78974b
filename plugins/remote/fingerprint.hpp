// fingerprint.hpp: the op-table fingerprint this plugin sends in Hello.
// remote/common/protocol.hpp computes it with bp_op_name, which lives in
// libbackplane; a plugin links nothing of Backplane, so it names the ops
// itself, in enum order. The static_assert stops the build when an op is
// added without a name here, and tests/plugins/remote checks that both
// fingerprints agree.
#ifndef BP_PLUGIN_REMOTE_FINGERPRINT_HPP_
#define BP_PLUGIN_REMOTE_FINGERPRINT_HPP_

#include <cstdio>
#include <string>

#include "backplane/backplane.h"
#include "protocol.hpp"

namespace bp::remote_plugin {

inline constexpr const char *k_op_names[] = {
    "NONE", "VIEW",   "RESHAPE", "PERMUTE",  "TRANSPOSE", "ADD",     "SUB",      "MUL",  "DIV",  "SCALE",   "CLAMP",
    "NEG",  "ABS",    "SQR",     "SQRT",     "EXP",       "RELU",    "GELU",     "SILU", "TANH", "SIGMOID", "SUM_ROWS",
    "MEAN", "ARGMAX", "NORM",    "RMS_NORM", "SOFT_MAX",  "MUL_MAT", "GET_ROWS", "CPY",  "CONT", "CONCAT",  "ROPE"};
static_assert(sizeof(k_op_names) / sizeof(k_op_names[0]) == BP_OP_COUNT,
              "name every bp_op here, in enum order (the remote fingerprint)");

// The same value as bp::remote::op_table_fingerprint(), without libbackplane.
inline std::string op_table_fingerprint() {
  namespace d = bp::remote::detail;
  uint64_t h = 0xcbf29ce484222325ull;
  d::fnv1a_str(h, "backplane-remote-op-table");
  d::fnv1a_u64(h, BP_OP_COUNT);
  for (const char *name : k_op_names) d::fnv1a_str(h, name);
  d::fnv1a_u64(h, BP_TYPE_COUNT);
  for (int t = 0; t < BP_TYPE_COUNT; ++t) {
    d::fnv1a_str(h, bp_type_name(static_cast<bp_type>(t)));
    d::fnv1a_u64(h, bp_type_size(static_cast<bp_type>(t)));
  }
  d::fnv1a_u64(h, BP_MAX_DIMS);
  d::fnv1a_u64(h, BP_MAX_SRC);
  d::fnv1a_u64(h, BP_MAX_OP_PARAMS);
  d::fnv1a_u64(h, BP_MAX_NAME);
  char out[32];
  std::snprintf(out, sizeof out, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace bp::remote_plugin

#endif  // BP_PLUGIN_REMOTE_FINGERPRINT_HPP_
