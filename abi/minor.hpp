// abi/minor.hpp: what the ABI minor a plugin was built for changes for the
// host (plugin.h, BP_PLUGIN_ABI_MINOR). Slots appended by a minor are
// reached through BP_HAS_SLOT (tables.hpp); this is the rest:
//  - starting a plugin: init_with_host (1.2) when its table has the slot,
//    else init;
//  - graph nodes whose meaning grew in a minor: a plugin built before it
//    would misread them, so the host answers "not supported" for it.
//
// Leaf module: includes backplane/plugin.h and the standard library only.
#pragma once

#include <cstdint>

#include "backplane/plugin.h"

namespace bp::abi {

// Calls |iface|'s init_with_host with |host| when the table reaches that slot
// and it is non-NULL, else init (never both). The one way the host starts a
// plugin (the loader, the probe's child). Exceptions pass through (the
// caller runs this inside call_slot).
bp_status call_init(const bp_plugin_i *iface, const bp_host_api *host, void **out_plugin, bp_error *err);

// The lowest descriptor abi_minor a plugin must have been built for to be
// asked about |node| by supports_op: 2 for a ROPE with src[2] (frequency
// factors, ABI 1.2), which a plugin built before checks only by src[0] and
// src[1] and would run without them; 4 for ATTENTION and SET_ROWS (new in
// 1.4), which an older plugin's supports_op has never seen; 0 for every
// other node.
uint32_t op_min_minor(const bp_tensor *node);

// False when a plugin of descriptor minor |plugin_minor| must not be asked
// about |node| (op_min_minor above it): the host answers "not supported"
// for the plugin, so the scheduler runs the node elsewhere.
inline bool plugin_may_see(uint32_t plugin_minor, const bp_tensor *node) { return op_min_minor(node) <= plugin_minor; }

}  // namespace bp::abi
