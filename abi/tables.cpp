// abi/tables.cpp: slot lists of the ABI tables (see tables.hpp).
#include "abi/tables.hpp"

#include <cstdint>
#include <cstring>

namespace bp::abi {
namespace {

#define BP_SLOT(type, field, required) \
  { #field, offsetof(type, field), required }
// End of |field|: the 1.0 minimum size when |field| is the last 1.0 member.
#define BP_END(type, field) (offsetof(type, field) + sizeof(static_cast<type *>(nullptr)->field))

constexpr slot k_plugin[] = {
    BP_SLOT(bp_plugin_i, init, true),
    BP_SLOT(bp_plugin_i, shutdown, true),
    BP_SLOT(bp_plugin_i, device_count, true),
    BP_SLOT(bp_plugin_i, device_get, true),
    BP_SLOT(bp_plugin_i, enumerate, false),       // ABI 1.1
    BP_SLOT(bp_plugin_i, init_with_host, false),  // ABI 1.2
};
constexpr slot k_device[] = {
    BP_SLOT(bp_device_i, get_props, true),
    BP_SLOT(bp_device_i, backend_init, true),
    BP_SLOT(bp_device_i, buffer_type, true),
    BP_SLOT(bp_device_i, host_buffer_type, false),
    BP_SLOT(bp_device_i, buffer_from_host_ptr, false),
    BP_SLOT(bp_device_i, event_new, false),
    BP_SLOT(bp_device_i, weight_buffer_type, false),  // appended in 1.3
};
constexpr slot k_buffer_type[] = {
    BP_SLOT(bp_buffer_type_i, name, true),        BP_SLOT(bp_buffer_type_i, alloc, true),
    BP_SLOT(bp_buffer_type_i, alignment, true),   BP_SLOT(bp_buffer_type_i, max_size, false),
    BP_SLOT(bp_buffer_type_i, alloc_size, false), BP_SLOT(bp_buffer_type_i, is_host, false),
};
constexpr slot k_buffer[] = {
    BP_SLOT(bp_buffer_i, free, true),         BP_SLOT(bp_buffer_i, base, true),
    BP_SLOT(bp_buffer_i, init_tensor, false), BP_SLOT(bp_buffer_i, set_tensor, true),
    BP_SLOT(bp_buffer_i, get_tensor, true),   BP_SLOT(bp_buffer_i, memset_tensor, false),
    BP_SLOT(bp_buffer_i, copy_tensor, false), BP_SLOT(bp_buffer_i, clear, true),
    BP_SLOT(bp_buffer_i, reset, false),       BP_SLOT(bp_buffer_i, set_usage, false),
};
constexpr slot k_backend[] = {
    BP_SLOT(bp_backend_i, free, true),
    BP_SLOT(bp_backend_i, buffer_type, true),
    BP_SLOT(bp_backend_i, set_tensor_async, false),
    BP_SLOT(bp_backend_i, get_tensor_async, false),
    BP_SLOT(bp_backend_i, copy_tensor_async, false),
    BP_SLOT(bp_backend_i, synchronize, false),
    BP_SLOT(bp_backend_i, graph_plan_create, false),
    BP_SLOT(bp_backend_i, graph_plan_free, false),
    BP_SLOT(bp_backend_i, graph_plan_compute, false),
    BP_SLOT(bp_backend_i, graph_compute, true),
    BP_SLOT(bp_backend_i, supports_op, true),
    BP_SLOT(bp_backend_i, supports_buft, true),
    BP_SLOT(bp_backend_i, offload_op, false),
    BP_SLOT(bp_backend_i, event_record, false),
    BP_SLOT(bp_backend_i, event_wait, false),
};
constexpr slot k_event[] = {
    BP_SLOT(bp_event_i, synchronize, true),
    BP_SLOT(bp_event_i, free, true),
};

template <size_t N>
constexpr size_t count(const slot (&)[N]) {
  return N;
}

}  // namespace

// ABI 1.0 ends after n_params for the plugin table (enumerate is 1.1,
// init_with_host 1.2); every other table is still as 1.0 defined it.
const table plugin_table = {"bp_plugin_i", BP_END(bp_plugin_i, n_params), k_plugin, count(k_plugin)};
const table device_table = {"bp_device_i", BP_END(bp_device_i, event_new), k_device, count(k_device)};
const table buffer_type_table = {"bp_buffer_type_i", BP_END(bp_buffer_type_i, is_host), k_buffer_type,
                                 count(k_buffer_type)};
const table buffer_table = {"bp_buffer_i", BP_END(bp_buffer_i, set_usage), k_buffer, count(k_buffer)};
const table backend_table = {"bp_backend_i", BP_END(bp_backend_i, event_wait), k_backend, count(k_backend)};
const table event_table = {"bp_event_i", BP_END(bp_event_i, free), k_event, count(k_event)};

std::string check_table(const table &t, const void *iface) {
  const std::string rule = " (PLG-5)";
  if (iface == nullptr) return std::string("no ") + t.type_name + " table (NULL)" + rule;
  uint32_t size = 0;
  std::memcpy(&size, iface, sizeof size);
  if (size < t.min_size)
    return std::string(t.type_name) + " table is " + std::to_string(size) + " bytes, ABI " +
           std::to_string(BP_PLUGIN_ABI_VERSION) + ".0 needs at least " + std::to_string(t.min_size) + rule;
  const auto *bytes = static_cast<const unsigned char *>(iface);
  for (size_t i = 0; i < t.n_slots; ++i) {
    const slot &s = t.slots[i];
    if (!s.required) continue;
    // Read the slot as raw bytes: only its NULL-ness matters here.
    void (*fn)() = nullptr;
    std::memcpy(&fn, bytes + s.offset, sizeof fn);
    if (fn == nullptr) return std::string("required slot ") + t.type_name + "." + s.name + " is NULL" + rule;
  }
  return {};
}

}  // namespace bp::abi
