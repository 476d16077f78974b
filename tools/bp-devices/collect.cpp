// collect.cpp: reads plugins, devices and rejected candidates from the
// registry into an inventory. Every failure is kept as text: bp-devices is
// the place where a user learns why a plugin is missing.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "report.hpp"

namespace bp::tools {
namespace {

const char *param_type_name(bp_param_type t) {
  switch (t) {
    case BP_PARAM_INT: return "INT";
    case BP_PARAM_BOOL: return "BOOL";
    case BP_PARAM_STRING: return "STRING";
  }
  return "?";
}

std::string str(const char *s) { return s ? s : ""; }

std::vector<std::string> cap_names(uint32_t caps) {
  static const struct {
    uint32_t bit;
    const char *name;
  } kCaps[] = {
      {BP_DEVICE_CAP_ASYNC, "async"},
      {BP_DEVICE_CAP_EVENTS, "events"},
      {BP_DEVICE_CAP_HOST_BUFFER, "host-buffer"},
      {BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR, "buffer-from-host-ptr"},
      {BP_DEVICE_CAP_HOST_MEMORY, "host-memory"},
  };
  std::vector<std::string> out;
  uint32_t known = 0;
  for (const auto &c : kCaps) {
    known |= c.bit;
    if (caps & c.bit) out.push_back(c.name);
  }
  if (caps & ~known) out.push_back("unknown-0x" + [&] {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%x", caps & ~known);
    return std::string(buf);
  }());
  return out;
}

std::vector<param_row> params_of(const bp_plugin *p) {
  std::vector<param_row> rows;
  for (size_t i = 0, n = bp_plugin_param_count(p); i < n; ++i) {
    const bp_param_info *info = bp_plugin_param(p, i);
    if (!info) continue;
    param_row r;
    r.name = str(info->name);
    r.type = param_type_name(info->type);
    r.default_value = str(info->default_value);
    r.doc = str(info->doc);
    r.has_range = info->type == BP_PARAM_INT;
    r.min_value = info->min_value;
    r.max_value = info->max_value;
    rows.push_back(r);
  }
  return rows;
}

// Log sink while collecting: warnings and errors that are not refusals
// (those are listed as rejected candidates) become problems, such as a
// BP_PLUGIN_PATH entry that is not a folder or a device count clamped to a
// limit. With BP_LOG set, every message also goes to stderr as usual.
struct log_capture {
  std::vector<std::string> *problems;
  bool echo;

  static void sink(bp_log_level level, const char *source, const char *message, void *user) {
    auto *self = static_cast<log_capture *>(user);
    const std::string src = source ? source : "?", msg = message ? message : "";
    if (self->echo) std::fprintf(stderr, "[backplane] %s: %s\n", src.c_str(), msg.c_str());
    if (level >= BP_LOG_WARN && msg.rfind("refused ", 0) != 0) self->problems->push_back(src + ": " + msg);
  }
};

std::string failure(const std::string &what, bp_status st) {
  std::string msg = bp_last_error();
  return what + ": " + bp_status_name(st) + (msg.empty() ? "" : ": " + msg);
}

}  // namespace

inventory collect(const std::vector<std::string> &paths, const std::vector<std::string> &files) {
  inventory inv;
  log_capture capture{&inv.problems, std::getenv("BP_LOG") != nullptr};
  if (!capture.echo) bp_log_set_level(BP_LOG_WARN);
  bp_log_set_callback(&log_capture::sink, &capture);
  std::vector<rejected_row> explicit_failures;
  for (const auto &dir : paths) {
    bp_status st = bp_registry_add_path(dir.c_str());
    if (st != BP_OK) inv.problems.push_back(failure("--plugin-path " + dir, st));
  }
  for (const auto &file : files) {
    bp_status st = bp_registry_load(file.c_str(), nullptr);
    if (st != BP_OK) explicit_failures.push_back({file, bp_status_name(st), bp_last_error()});
  }
  bp_status st = bp_registry_discover();
  if (st != BP_OK) inv.problems.push_back(failure("discovery", st));

  for (size_t i = 0, n = bp_plugin_count(); i < n; ++i) {
    bp_plugin *p = bp_plugin_get(i);
    if (!p) continue;
    plugin_row row{str(bp_plugin_name(p)), str(bp_plugin_version(p)), str(bp_plugin_path(p)),
                   str(bp_plugin_description(p)), params_of(p), {}, "OK", {}};
    // Enumerates the plugin's devices if it deferred that (Vulkan, OpenCL).
    const char *why = nullptr;
    bp_status status = bp_plugin_status(p, &why);
    if (status != BP_OK) {
      row.status = bp_status_name(status);
      row.status_message = str(why);
      // Other failures were logged as warnings, which are problems already.
      if (status == BP_ERR_UNAVAILABLE) inv.problems.push_back(row.name + ": UNAVAILABLE: " + row.status_message);
    }
    inv.plugins.push_back(row);
  }

  for (size_t i = 0, n = bp_device_count(); i < n; ++i) {
    bp_device *dev = bp_device_get(i);
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (!dev || bp_device_describe(dev, &info) != BP_OK) {
      inv.problems.push_back(failure("device " + std::to_string(i), BP_ERR_INTERNAL));
      continue;
    }
    device_row d;
    d.index = i;
    d.plugin_index = info.index;
    d.plugin = str(info.plugin ? bp_plugin_name(info.plugin) : nullptr);
    d.id = str(info.id);
    d.spec = str(info.spec);
    d.name = str(info.name);
    d.description = str(info.description);
    d.type = str(bp_device_type_name(info.type));
    d.memory_total = info.memory_total;
    d.memory_free = info.memory_free;
    d.caps = cap_names(info.caps);
    for (auto &p : inv.plugins)
      if (p.name == d.plugin) p.devices.push_back(inv.devices.size());
    inv.devices.push_back(d);
  }

  for (size_t i = 0, n = bp_rejected_count(); i < n; ++i) {
    const char *path = nullptr, *message = nullptr;
    bp_status status = BP_OK;
    if (bp_rejected_get(i, &path, &status, &message) != BP_OK) continue;
    inv.rejected.push_back({str(path), bp_status_name(status), str(message)});
  }
  // An explicit --plugin failure the registry did not list itself.
  for (const auto &f : explicit_failures) {
    bool listed = std::any_of(inv.rejected.begin(), inv.rejected.end(), [&](const rejected_row &r) {
      return r.path == f.path || (!r.path.empty() && f.path.size() >= r.path.size() &&
                                  f.path.compare(f.path.size() - r.path.size(), r.path.size(), r.path) == 0) ||
             (!f.path.empty() && r.path.size() >= f.path.size() &&
              r.path.compare(r.path.size() - f.path.size(), f.path.size(), f.path) == 0);
    });
    if (!listed) inv.rejected.push_back(f);
  }
  bp_log_set_callback(nullptr, nullptr);
  return inv;
}

}  // namespace bp::tools
