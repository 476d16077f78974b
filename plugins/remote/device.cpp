// device.cpp: discovery (a session with every server in BP_REMOTE, its
// devices listed as remote:N), device properties and backend creation.
//
// A server that cannot be reached is a warning naming it and the cause
// (bp-devices lists it under Problems); the other servers' devices are
// still listed. Only when no server answers is the plugin UNAVAILABLE.
#include <cinttypes>
#include <string>

#include "backplane/plugin_guard.hpp"
#include "remote.hpp"

namespace bp::remote_plugin {
namespace {

bp_device_type type_of(uint32_t t) {
  switch (t) {
    case BP_DEVICE_TYPE_GPU:
      return BP_DEVICE_TYPE_GPU;
    case BP_DEVICE_TYPE_IGPU:
      return BP_DEVICE_TYPE_IGPU;
    case BP_DEVICE_TYPE_ACCEL:
      return BP_DEVICE_TYPE_ACCEL;
    default:
      return BP_DEVICE_TYPE_CPU;
  }
}

// Remote memory is never host memory here, transfers are synchronous, and
// events are local (backend.cpp): keep only what stays true over the wire.
uint32_t caps_of(uint32_t server_caps) {
  (void)server_caps;
  return BP_DEVICE_CAP_EVENTS;
}

size_t power_of_two_at_least(uint64_t v) {
  size_t p = 64;
  while (p < v && p < (size_t{1} << 30)) p <<= 1;
  return p;
}

void add_devices(plugin_state *plugin, server_conn *conn, const pb::HelloReply &hello) {
  for (const pb::DeviceInfo &info : hello.devices()) {
    auto dev = std::make_unique<device_state>();
    dev->plugin = plugin;
    dev->server = conn;
    dev->info = info;
    dev->remote_index = info.index();
    // Short: the serving plugin (whose API's precision applies) and where.
    dev->name = (info.plugin().empty() ? info.name() : info.plugin()) + "@" + conn->address;
    dev->description = conn->address + ": " + info.description();
    dev->id = hello.server_id() + "/" + info.id();
    dev->type = type_of(info.type());
    dev->caps = caps_of(info.caps());
    dev->alignment = power_of_two_at_least(info.buffer_alignment());
    dev->max_size = info.buffer_max_size();
    plugin->devices.push_back(std::move(dev));
  }
}

}  // namespace

bp_status enumerate_devices(plugin_state *plugin, bp_error *err) {
  if (bp_status s = read_config(&plugin->config, err); s != BP_OK) return s;
  const client_config &cfg = plugin->config;
  // No server named is the usual state of a machine that uses no remote
  // devices: no devices, not a problem to report.
  if (cfg.servers.empty()) {
    bp_host_logf(plugin->host, BP_LOG_INFO,
                 "no servers: set BP_REMOTE=host:port[,host:port...] to the bp-serve addresses to use remote devices");
    return BP_OK;
  }
  std::string failures;
  for (const std::string &address : cfg.servers) {
    auto conn = std::make_unique<server_conn>();
    conn->host = plugin->host;
    conn->address = address;
    conn->config = &plugin->config;
    bp_error e{};
    if (server_connect(conn.get(), &e) != BP_OK) {
      bp_host_logf(plugin->host, BP_LOG_WARN, "%s", e.message);
      failures += (failures.empty() ? "" : "; ") + std::string(e.message);
      continue;
    }
    std::shared_ptr<session> s;
    if (server_session(conn.get(), false, &s, &e) == BP_OK) add_devices(plugin, conn.get(), s->hello);
    plugin->servers.push_back(std::move(conn));
  }
  if (plugin->servers.empty())
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "no server in BP_REMOTE answered: %s", failures.c_str());
  bp_host_logf(plugin->host, BP_LOG_DEBUG, "%zu devices on %zu of %zu servers", plugin->devices.size(),
               plugin->servers.size(), cfg.servers.size());
  return BP_OK;
}

plugin_state::~plugin_state() {
  for (auto &s : servers) server_close(s.get());
  devices.clear();
  servers.clear();
}

namespace {

// The plugin's parts of plugins::device_slots.
struct remote_device {
  using device = device_state;
  static plugins::device_facts facts(device_state &dev) {
    return {dev.name.c_str(), dev.description.c_str(), dev.id.c_str(),        dev.type,
            dev.caps,         dev.info.memory_total(), dev.info.memory_free()};
  }
  static bp_status backend_init(device_state *dev, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                                bp_error *err) {
    backend_options opt;
    opt.timeout_ms = dev->plugin->config.timeout_ms;
    opt.chunk_bytes = dev->plugin->config.chunk_bytes;
    if (const bp_param_value *p = plugins::find_param(params, n_params, "server");
        p && p->string_value && *p->string_value) {
      // server=ADDR: the host's device index counts within that server.
      const std::string address = p->string_value;
      std::string known;
      for (const auto &s : dev->plugin->servers) known += (known.empty() ? "" : ", ") + s->address;
      known = "servers with devices: " + (known.empty() ? std::string("none") : known) + "; add it to BP_REMOTE";
      uint32_t index = 0;
      for (uint32_t i = 0; i < dev->plugin->devices.size(); ++i)
        if (dev->plugin->devices[i].get() == dev) index = i;
      if (bp_status s = plugins::pick_in_group(
              dev->plugin->devices, index, [&](const device_state &d) { return d.server->address == address; },
              ("server=" + address).c_str(), known.c_str(), &dev, err);
          s != BP_OK)
        return s;
    }
    // The host fills in the schema's defaults; a default value leaves the
    // environment's setting (BP_REMOTE_TIMEOUT_MS, BP_REMOTE_CHUNK_BYTES).
    int64_t timeout = opt.timeout_ms;
    if (bp_status s = plugins::read_int_in(params, n_params, "timeout_ms", 1, 3600000, &timeout, err); s != BP_OK)
      return s;
    if (timeout != k_default_timeout_ms) opt.timeout_ms = timeout;
    int64_t chunk = static_cast<int64_t>(opt.chunk_bytes);
    if (bp_status s = plugins::read_int_in(params, n_params, "chunk_bytes", 4096, 4 << 20, &chunk, err); s != BP_OK)
      return s;
    if (chunk == k_default_chunk_bytes) chunk = static_cast<int64_t>(dev->plugin->config.chunk_bytes);
    opt.chunk_bytes = static_cast<size_t>(chunk);
    return backend_create(dev, opt, out, err);
  }
  static constexpr auto event_new = event_create;
  static bp_buffer_type_ref buffer_type(device_state &dev) { return buffer_type_of(&dev); }
};

using slots = plugins::device_slots<remote_device>;

}  // namespace

const bp_device_i device_iface = slots::table();

}  // namespace bp::remote_plugin
