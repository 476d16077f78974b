// report.hpp: what bp-devices gathers from the registry, and its two output
// forms (aligned text for people, JSON for scripts). Both forms carry the
// same facts.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace bp::tools {

struct param_row {
  std::string name, type, default_value, doc;
  bool has_range = false;
  int64_t min_value = 0, max_value = 0;
};

struct plugin_row {
  std::string name, version, path, description;
  std::vector<param_row> params;
  std::vector<size_t> devices;  // indices into inventory::devices
  std::string status = "OK";    // bp_plugin_status: why it has no devices
  std::string status_message;
};

struct device_row {
  size_t index = 0;        // global, as bp_device_get
  uint32_t plugin_index = 0;  // within its plugin
  std::string plugin, id, spec, name, description, type;
  uint64_t memory_total = 0, memory_free = 0;
  std::vector<std::string> caps;
};

struct rejected_row {
  std::string path, status, message;
};

struct inventory {
  std::vector<plugin_row> plugins;
  std::vector<device_row> devices;
  std::vector<rejected_row> rejected;
  std::vector<std::string> problems;  // failures and warnings that are not candidates (bad --plugin-path, BP_PLUGIN_PATH entries)
};

// Adds |paths| to the search, loads |files|, runs discovery and reads back
// everything. Never fails: each failure becomes a rejected row or a problem.
inventory collect(const std::vector<std::string> &paths, const std::vector<std::string> &files);

nlohmann::json to_json(const inventory &inv);
std::string to_text(const inventory &inv);

}  // namespace bp::tools
