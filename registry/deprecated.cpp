// deprecated.cpp: the 0.1 names of the registry's public functions, each
// forwarding to its 0.2 name (backplane.h's deprecated section; the core's
// are in core/deprecated.cpp). Removed in 0.3. None takes an enum, so none
// can load a C caller's out-of-range value as one (DeprecatedNames.
// EveryForwarderTakingAnEnumIsCalledWithABadOne keeps that list).
#define BP_DEPRECATED(use)
#include "backplane/backplane.h"

extern "C" {

bp_status bp_backend_init(const char *spec, bp_backend **out_backend) { return bp_backend_new(spec, out_backend); }
bp_status bp_backends_init(const char *list, bp_backend **out, size_t capacity, size_t *out_count) {
  return bp_backend_new_list(list, out, capacity, out_count);
}
bp_status bp_device_init_backend(bp_device *dev, const char *params, bp_backend **out_backend) {
  return bp_backend_new_on_device(dev, params, out_backend);
}
size_t bp_plugin_n_params(const bp_plugin *p) { return bp_plugin_param_count(p); }
bp_status bp_device_get_info(const bp_device *dev, bp_device_info *out) { return bp_device_describe(dev, out); }
bp_plugin *bp_plugin_find(const char *name) {
  bp_plugin *p = nullptr;
  bp_registry_find_plugin(name, &p);
  return p;
}

}  // extern "C"
