// plugin.cpp: the remote plugin's exported descriptor and entry, the plugin
// table (init, shutdown, enumerate, devices, parameter schema).
//
// init only stores the host table: loading the plugin opens no connection.
// The servers in BP_REMOTE are asked for their devices once, by the first
// of enumerate, device_count and device_get (the host calls enumerate when
// a device of this plugin is first listed or asked for, never for a spec
// naming another plugin).
#include "backplane/plugin_guard.hpp"
#include "plugin_common.hpp"
#include "remote.hpp"

namespace bp::remote_plugin {
namespace {

const bp_param_info params_schema[] = {
    {sizeof(bp_param_info), "server", BP_PARAM_STRING, "",
     "count the device index within this server of BP_REMOTE (remote:server=host:7070,device=0); empty = across all", 0,
     0},
    {sizeof(bp_param_info), "timeout_ms", BP_PARAM_INT, "10000",
     "deadline of each call to the server in ms (transfers get 1 ms more per 64 KiB); the default means "
     "BP_REMOTE_TIMEOUT_MS when set",
     1, 3600000},
    {sizeof(bp_param_info), "chunk_bytes", BP_PARAM_INT, "1048576",
     "bytes per message of this backend's streamed transfers; the default means BP_REMOTE_CHUNK_BYTES when set", 4096,
     4194304},
};

using lifecycle = plugins::plugin_lifecycle<plugin_state>;  // init keeps the host table, nothing more

using devices = plugins::device_list<plugin_state, enumerate_devices, &device_iface>;

const bp_plugin_i plugin_iface = plugins::plugin_table_of<lifecycle, devices>(params_schema);

}  // namespace

const bp_plugin_i *plugin_table() { return &plugin_iface; }

}  // namespace bp::remote_plugin

extern "C" {
const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("remote", "0.1.0", "devices served by bp-serve on other machines, over gRPC");

const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  return bp::plugins::plugin_entry(host_abi, host, err, bp::remote_plugin::plugin_table());
}
}  // extern "C"
