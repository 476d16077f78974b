// abi/tables.hpp: the one description of every plugin ABI table, the one
// function that checks a table against it (docs/plugin-contract.md PLG-5),
// and BP_HAS_SLOT, the test every optional slot call goes through.
//
// Each table is checked once, when the host first gets it: the plugin table
// at load, device and buffer type tables at enumeration, a backend table at
// creation, a buffer table at allocation, an event table at creation. A
// refusal names the exact slot and the rule, never a list of candidates.
//
// The minimum size of a table is the end of its last ABI 1.0 slot; slots
// appended by a later minor (so far bp_plugin_i.enumerate in 1.1 and
// bp_plugin_i.init_with_host in 1.2) are optional
// by construction and are reached only through BP_HAS_SLOT.
//
// Leaf module: includes backplane/plugin.h and the standard library only.
#pragma once

#include <cstddef>
#include <string>

#include "backplane/plugin.h"

// True when |iface| (a table starting with struct_size) is long enough to
// hold |field| and the slot is non-NULL. Never call an optional slot without
// it; required slots were checked by check_table when the table arrived.
#define BP_HAS_SLOT(iface, type, field)                                                            \
  ((iface) != nullptr && (iface)->struct_size >= offsetof(type, field) + sizeof((iface)->field) && \
   (iface)->field != nullptr)

namespace bp::abi {

struct slot {
  const char *name;
  size_t offset;
  bool required;
};

struct table {
  const char *type_name;  // "bp_backend_i"
  size_t min_size;        // end of the last ABI 1.0 slot
  const slot *slots;
  size_t n_slots;
};

extern const table plugin_table;       // bp_plugin_i (data members are not slots)
extern const table device_table;       // bp_device_i
extern const table buffer_type_table;  // bp_buffer_type_i
extern const table buffer_table;       // bp_buffer_i
extern const table backend_table;      // bp_backend_i
extern const table event_table;        // bp_event_i

// Empty when |iface| is long enough and every required slot is non-NULL;
// otherwise why not, e.g. "bp_backend_i table: required slot supports_buft is
// NULL (PLG-5)" or "... is 8 bytes, ABI 1.0 needs at least 72 (PLG-5)".
// |iface| may be NULL ("no bp_backend_i table").
std::string check_table(const table &t, const void *iface);

}  // namespace bp::abi
