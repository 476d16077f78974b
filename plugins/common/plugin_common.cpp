// plugin_common.cpp: the plugins' shared ABI edge (plugin_common.hpp).
#include "plugin_common.hpp"

#include <cstddef>
#include <cstring>
#include <string>

namespace bp::plugins {

const bp_plugin_i *plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err,
                                const bp_plugin_i *table) noexcept {
  if (host_abi != BP_PLUGIN_ABI_VERSION) {
    bp_error_setf(err, BP_ERR_INCOMPATIBLE, "built for plugin ABI %u, host speaks %u; rebuild the plugin",
                  (unsigned)BP_PLUGIN_ABI_VERSION, (unsigned)host_abi);
    return nullptr;
  }
  if (host && host->struct_size < offsetof(bp_host_api, log)) {
    bp_error_setf(err, BP_ERR_INCOMPATIBLE, "host services table too small (%u bytes)", (unsigned)host->struct_size);
    return nullptr;
  }
  return table;
}

void copy_props(const bp_device_props &props, bp_device_props *out) noexcept {
  const uint32_t size = out->struct_size;
  const size_t n = size < sizeof props ? size : sizeof props;
  std::memcpy(static_cast<void *>(out), &props, n);
  out->struct_size = size;
}

void fill_props(const device_facts &f, bp_device_props *out) noexcept {
  bp_device_props p{};
  p.name = f.name;
  p.description = f.description;
  p.id = f.id;
  p.type = f.type;
  p.caps = f.caps;
  p.memory_total = f.memory_total;
  p.memory_free = f.memory_free;
  copy_props(p, out);
}

bp_status check_graph(const void *backend, const bp_graph_desc *graph, bp_error *err) {
  if (!backend || !graph)
    return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "graph_compute needs a backend and a graph");
  if (graph->n_nodes > 0 && !graph->nodes)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "graph has %u nodes but no node array", graph->n_nodes);
  for (uint32_t i = 0; i < graph->n_nodes; ++i)
    if (!graph->nodes[i]) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "graph node %u is NULL", i);
  return BP_OK;
}

const bp_param_value *find_param(const bp_param_value *params, uint32_t n, const char *name) {
  const bp_param_value *found = nullptr;
  for (uint32_t i = 0; params && i < n; ++i)
    if (params[i].name && std::strcmp(params[i].name, name) == 0) found = &params[i];
  return found;
}

void read_bool(const bp_param_value *params, uint32_t n, const char *name, bool *out) {
  if (const bp_param_value *p = find_param(params, n, name)) *out = p->int_value != 0;
}

void read_int(const bp_param_value *params, uint32_t n, const char *name, int64_t *out) {
  if (const bp_param_value *p = find_param(params, n, name)) *out = p->int_value;
}

void read_string(const bp_param_value *params, uint32_t n, const char *name, const char **out) {
  if (const bp_param_value *p = find_param(params, n, name); p && p->string_value) *out = p->string_value;
}

bp_status read_choice(const bp_param_value *params, uint32_t n, const char *name, std::initializer_list<int> allowed,
                      int *out, bp_error *err) {
  const bp_param_value *p = find_param(params, n, name);
  if (!p) return BP_OK;
  bool valid = p->int_value == 0;
  std::string values = "0 (auto)";
  size_t i = 0;
  for (int v : allowed) {
    valid = valid || p->int_value == v;
    values += (++i == allowed.size() ? " or " : ", ") + std::to_string(v);
  }
  if (!valid)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s=%lld; use %s", name, static_cast<long long>(p->int_value),
                         values.c_str());
  *out = static_cast<int>(p->int_value);
  return BP_OK;
}

bp_status read_named(const bp_param_value *params, uint32_t n, const char *name, const char *const *names, size_t count,
                     int *out, bp_error *err) {
  const char *given = nullptr;
  read_string(params, n, name, &given);
  if (!given) return BP_OK;
  std::string values;
  for (size_t i = 0; i < count; ++i) {
    if (std::strcmp(given, names[i]) == 0) {
      *out = static_cast<int>(i);
      return BP_OK;
    }
    values += (i == 0 ? "" : i + 1 == count ? " or " : ", ") + std::string(names[i]);
  }
  return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s=%s; use %s", name, given, values.c_str());
}

bp_status read_int_in(const bp_param_value *params, uint32_t n, const char *name, int64_t lo, int64_t hi, int64_t *out,
                      bp_error *err) {
  const bp_param_value *p = find_param(params, n, name);
  if (!p) return BP_OK;
  if (p->int_value < lo || p->int_value > hi)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s=%lld; use %lld..%lld", name,
                         static_cast<long long>(p->int_value), static_cast<long long>(lo), static_cast<long long>(hi));
  *out = p->int_value;
  return BP_OK;
}

}  // namespace bp::plugins
