// plugin.cpp: the opencl plugin's exported descriptor and entry, the plugin
// table (init, shutdown, enumerate, devices, parameter schema) and the
// logging and error helpers the other files share.
//
// init only stores the host table: loading the plugin costs nothing. The
// OpenCL platforms are asked for once, by the first of enumerate,
// device_count and device_get (the host calls enumerate when a device of
// this plugin is first listed or asked for); contexts and programs come
// later still (device.cpp, program_cache.cpp).
#include <CL/cl.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "opencl.hpp"
#include "plugin_common.hpp"

namespace bp::opencl {
namespace {

const bp_param_info params_schema[] = {
    {sizeof(bp_param_info), "platform", BP_PARAM_INT, "-1",
     "count the device index within this platform (opencl:platform=1,device=0); -1 = across all platforms", -1, 1024},
    {sizeof(bp_param_info), "cache", BP_PARAM_BOOL, "true",
     "keep built program binaries on disk so the next process does not compile", 0, 0},
    {sizeof(bp_param_info), "cache_dir", BP_PARAM_STRING, "",
     "program cache folder; default $BP_CACHE_DIR, else $XDG_CACHE_HOME/backplane, else ~/.cache/backplane", 0, 0},
    {sizeof(bp_param_info), "matmul_cols", BP_PARAM_INT, "0",
     "MUL_MAT columns of b per work-item (1, 2 or 4; each takes 4 rows of a); 0 = chosen for the device", 0, 4},
    {sizeof(bp_param_info), "matmul_width", BP_PARAM_INT, "0",
     "MUL_MAT float lanes per vector along k (4, 8 or 16); 0 = the device's preferred width", 0, 16},
    {sizeof(bp_param_info), "matmul", BP_PARAM_STRING, "auto",
     "MUL_MAT kernels: auto (tiled through local memory on GPUs where N >= 32 and K % 4 == 0), dot or tiled (forced)",
     0, 0},
    {sizeof(bp_param_info), "attention", BP_PARAM_STRING, "auto",
     "ATTENTION kernels: row (a work-group per query row), tile (8 query rows per work-group, keys staged in local "
     "memory) or split (several work-groups per row over runs of the keys, then a merge); auto = on GPUs tile for "
     "prompts and split for a decode step over 512 keys or more, else row",
     0, 0},
    {sizeof(bp_param_info), "fuse", BP_PARAM_BOOL, "true",
     "run RMS_NORM/NORM then MUL, SILU then MUL, and MUL_MAT then ADD/MUL/SILU of its product, in one launch each "
     "(untraced graphs)",
     0, 0},
};

using lifecycle = plugins::plugin_lifecycle<plugin_state>;  // init keeps the host table, nothing more

// Devices found once, by the first of enumerate, device_count and
// device_get (plugins/common/plugin_common.hpp).
using devices = plugins::device_list<plugin_state, enumerate_devices, &device_iface>;

const bp_plugin_i plugin_iface = plugins::plugin_table_of<lifecycle, devices>(params_schema);

}  // namespace

const bp_plugin_i *plugin_table() { return &plugin_iface; }

}  // namespace bp::opencl

// The exported symbols, at global scope exactly as plugin.h declares them
// (so they carry its default visibility).
extern "C" {
const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("opencl", "0.1.0", "OpenCL devices of every platform the ICD loader finds");

const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  return bp::plugins::plugin_entry(host_abi, host, err, bp::opencl::plugin_table());
}
}  // extern "C"
