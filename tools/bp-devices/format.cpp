// format.cpp: the two output forms of bp-devices. Text is for people:
// sections, aligned columns, sizes in GiB/MiB. JSON is for scripts: the same
// facts, raw numbers, stable keys.
#include <cstdio>
#include <cstdint>
#include <sstream>

#include "report.hpp"
#include "common/text_table.hpp"

namespace bp::tools {
namespace {

using json = nlohmann::json;

std::string human_bytes(uint64_t n) {
  if (n == 0) return "unknown";
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string range_text(const param_row &p) {
  if (!p.has_range) return "";
  auto bound = [](int64_t v) {
    if (v == INT64_MAX) return std::string("max");
    if (v == INT64_MIN) return std::string("min");
    return std::to_string(v);
  };
  return bound(p.min_value) + ".." + bound(p.max_value);
}

using bp::tools::text_table;

// Outside text (file names, plugin messages) for a terminal: control bytes
// (a newline or an escape sequence in a file name) and bytes that are not
// UTF-8 are shown as \xNN, so no name can forge lines or move the cursor.
std::string printable(const std::string &s) {
  std::string out;
  auto hex = [&](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      hex(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs or surrogates) is kept.
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool ok = n != 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && n >= 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0) && !(c == 0xF0 && c1 < 0x90) &&
           !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok) {
      hex(c);
      ++i;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  return out;
}

json params_json(const std::vector<param_row> &params) {
  json arr = json::array();
  for (const auto &p : params) {
    json j = {{"name", p.name}, {"type", p.type}, {"default", p.default_value}, {"doc", p.doc}};
    j["min"] = p.has_range ? json(p.min_value) : json(nullptr);
    j["max"] = p.has_range ? json(p.max_value) : json(nullptr);
    arr.push_back(j);
  }
  return arr;
}

const plugin_row *plugin_of(const inventory &inv, const device_row &d) {
  for (const auto &p : inv.plugins)
    if (p.name == d.plugin) return &p;
  return nullptr;
}

std::string plural(size_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

json to_json(const inventory &inv) {
  json out;
  out["plugins"] = json::array();
  for (const auto &p : inv.plugins) {
    out["plugins"].push_back({{"name", p.name},
                              {"version", p.version},
                              {"path", p.path},
                              {"description", p.description},
                              {"params", params_json(p.params)},
                              {"devices", p.devices},
                              {"status", p.status},
                              {"status_message", p.status_message}});
  }
  out["devices"] = json::array();
  for (const auto &d : inv.devices) {
    const plugin_row *p = plugin_of(inv, d);
    out["devices"].push_back({{"index", d.index},
                              {"plugin", d.plugin},
                              {"plugin_index", d.plugin_index},
                              {"id", d.id},
                              {"spec", d.spec},
                              {"name", d.name},
                              {"description", d.description},
                              {"type", d.type},
                              {"memory_total", d.memory_total},
                              {"memory_free", d.memory_free},
                              {"caps", d.caps},
                              {"params", params_json(p ? p->params : std::vector<param_row>{})}});
  }
  out["rejected"] = json::array();
  for (const auto &r : inv.rejected)
    out["rejected"].push_back({{"path", r.path}, {"status", r.status}, {"message", r.message}});
  out["problems"] = inv.problems;
  return out;
}

std::string to_text(const inventory &inv) {
  std::ostringstream out;
  out << "Plugins: " << plural(inv.plugins.size(), "loaded", "loaded") << "\n";
  if (!inv.plugins.empty()) {
    std::vector<std::vector<std::string>> rows{{"NAME", "VERSION", "DEVICES", "FILE"}};
    for (const auto &p : inv.plugins)
      rows.push_back({p.name, p.version,
                      std::to_string(p.devices.size()) + (p.status == "OK" ? "" : " (" + p.status + ")"), printable(p.path)});
    out << text_table(rows, "  ");
  }

  out << "\nDevices: " << inv.devices.size() << "\n";
  for (const auto &d : inv.devices) {
    out << "  #" << d.index << "  " << d.name << "  (select with \"" << d.spec << "\")\n";
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"spec", d.spec});
    rows.push_back({"id", d.id});
    rows.push_back({"plugin", d.plugin + ", device " + std::to_string(d.plugin_index)});
    rows.push_back({"type", d.type});
    rows.push_back({"description", printable(d.description)});
    rows.push_back({"memory", d.memory_total == 0 && d.memory_free == 0
                                  ? std::string("unknown (the plugin does not report it)")
                                  : human_bytes(d.memory_total) + " total, " + human_bytes(d.memory_free) + " free"});
    std::string caps;
    for (const auto &c : d.caps) caps += (caps.empty() ? "" : ", ") + c;
    rows.push_back({"capabilities", caps.empty() ? "none" : caps});
    out << text_table(rows, "      ");
    const plugin_row *p = plugin_of(inv, d);
    if (p && !p->params.empty()) {
      out << "      parameters (\"" << d.plugin << ":key=value,...\"):\n";
      std::vector<std::vector<std::string>> prow;
      for (const auto &q : p->params) {
        std::string range = range_text(q);
        prow.push_back({q.name, q.type, "default " + (q.default_value.empty() ? "none" : q.default_value),
                        range.empty() ? "" : "range " + range, q.doc});
      }
      out << text_table(prow, "        ");
    } else {
      out << "      parameters: none\n";
    }
  }

  out << "\nRejected: " << plural(inv.rejected.size(), "candidate", "candidates") << "\n";
  for (const auto &r : inv.rejected) {
    out << "  " << printable(r.path) << "\n";
    out << "      " << r.status << ": " << printable(r.message) << "\n";
  }
  if (!inv.problems.empty()) {
    out << "\nProblems:\n";
    for (const auto &p : inv.problems) out << "  " << printable(p) << "\n";
  }
  return out.str();
}

}  // namespace bp::tools
