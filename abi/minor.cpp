// abi/minor.cpp: what a plugin's ABI minor changes for the host (minor.hpp).
#include "abi/minor.hpp"

#include "abi/tables.hpp"

namespace bp::abi {

bp_status call_init(const bp_plugin_i *iface, const bp_host_api *host, void **out_plugin, bp_error *err) {
  if (BP_HAS_SLOT(iface, bp_plugin_i, init_with_host)) return iface->init_with_host(host, out_plugin, err);
  return iface->init(out_plugin, err);
}

uint32_t op_min_minor(const bp_tensor *node) {
  if (node && node->op == BP_OP_ROPE && node->src[2] != nullptr) return 2;  // frequency factors
  if (node && (node->op == BP_OP_ATTENTION || node->op == BP_OP_SET_ROWS)) return 4;  // new ops
  return 0;
}

}  // namespace bp::abi
