// plugin_tables.hpp: the one description of every plugin ABI table, and the
// one function that checks a table against it (docs/plugin-contract.md PLG-5).
//
// Each table is checked once, when the host first gets it: the plugin table
// at load, device and buffer type tables at enumeration, a backend table at
// creation, a buffer table at allocation, an event table at creation. A
// refusal names the exact slot and the rule, never a list of candidates.
//
// The minimum size of a table is the end of its last ABI 1.0 slot; slots
// appended by a later minor (only bp_plugin_i.enumerate so far) are optional
// by construction and are reached only through BP_HAS_SLOT.
#pragma once

#include <cstddef>
#include <string>

#include "backplane/plugin.h"

namespace bp::plugin_tables {

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

extern const table plugin;       // bp_plugin_i (data members are not slots)
extern const table device;       // bp_device_i
extern const table buffer_type;  // bp_buffer_type_i
extern const table buffer;       // bp_buffer_i
extern const table backend;      // bp_backend_i
extern const table event;        // bp_event_i

// Empty when |iface| is long enough and every required slot is non-NULL;
// otherwise why not, e.g. "bp_backend_i table: required slot supports_buft is
// NULL (PLG-5)" or "... is 8 bytes, ABI 1.0 needs at least 72 (PLG-5)".
// |iface| may be NULL ("no bp_backend_i table").
std::string check(const table &t, const void *iface);

}  // namespace bp::plugin_tables
