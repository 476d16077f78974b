// params.cpp: from a parsed spec to a device and validated parameters.
//
// The parser (spec_parser.cpp) checked syntax; here the registry decides
// what the words mean: which plugin, which device (index, id= or auto),
// whether each key is one the plugin declared, and whether each value has
// the declared type and range. Defaults fill every key not given, so a
// plugin's backend_init always receives its whole schema (PLG-7). Errors
// list what exists (docs/failures.md #13, #14).
#include <algorithm>
#include <cstring>

#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

int type_rank(bp_device_type t) {
  switch (t) {
    case BP_DEVICE_TYPE_GPU: return 0;
    case BP_DEVICE_TYPE_IGPU: return 1;
    case BP_DEVICE_TYPE_ACCEL: return 2;
    default: return 3;
  }
}

const char *type_word(bp_param_type t) {
  return t == BP_PARAM_INT ? "INT" : t == BP_PARAM_BOOL ? "BOOL" : "STRING";
}

bool int_bounded(const bp_param_info &info) { return !(info.min_value == 0 && info.max_value == 0); }

// The first devices of |p| for a message; a plugin may have up to
// k_max_devices_per_plugin, and a message listing all of them helps nobody.
std::string describe_devices(const bp_plugin *p) {
  constexpr size_t k_shown = 16;
  std::string s;
  for (size_t i = 0; i < p->devices.size() && i < k_shown; ++i) {
    const bp_device &d = *p->devices[i];
    s += (s.empty() ? "" : ", ") + d.spec + " (" + d.name + ", id=" + d.id + ")";
  }
  if (p->devices.size() > k_shown)
    s += " and " + std::to_string(p->devices.size() - k_shown) + " more (bp-devices lists them all)";
  return s;
}

// "device=INT (0..1), id=STRING, threads=INT (1..256, default 4): worker threads"
std::string describe_keys(const bp_plugin *p) {
  std::string s = "device=INT";
  if (!p->devices.empty()) {
    uint32_t lo = p->devices.front()->index, hi = p->devices.back()->index;
    s += " (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  }
  s += ", id=STRING";
  for (const bp_param_info &info : p->params) {
    s += std::string(", ") + info.name + "=" + type_word(info.type) + " (";
    if (info.type == BP_PARAM_INT && int_bounded(info))
      s += std::to_string(info.min_value) + ".." + std::to_string(info.max_value) + ", ";
    s += std::string("default ") + (*info.default_value ? info.default_value : "none") + ")";
    if (info.doc && *info.doc) s += std::string(": ") + info.doc;
  }
  return s;
}

bp_status fail_at(const std::string &context, size_t column, bp_status code, const std::string &cause) {
  return bp::core::set_error(code, "bad " + context + " at column " + std::to_string(column) + ": " + cause);
}

std::string lower_copy(std::string s) {
  for (char &c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// Checks one value against its declared type; |text| becomes the canonical
// text form and |number| the integer form (INT and BOOL).
bool check_value(const bp_param_info &info, std::string &text, int64_t &number, std::string &why) {
  switch (info.type) {
    case BP_PARAM_INT:
      if (text.empty()) {
        number = 0;
        return true;
      }
      if (!parse_int64(text, &number)) {
        why = "'" + text + "' for '" + info.name + "' is not an integer" +
              (text.find_first_not_of("+-0123456789") == std::string::npos ? " (or it overflows 64 bits)" : "");
        return false;
      }
      if (int_bounded(info) && (number < info.min_value || number > info.max_value)) {
        why = "'" + std::string(info.name) + "' is " + text + ", outside its range " + std::to_string(info.min_value) + ".." +
              std::to_string(info.max_value);
        return false;
      }
      return true;
    case BP_PARAM_BOOL: {
      std::string v = lower_copy(text);
      if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") {
        number = 0;
      } else if (v == "1" || v == "true" || v == "yes" || v == "on") {
        number = 1;
      } else {
        why = "'" + text + "' for '" + info.name + "' is not a boolean; write true or false";
        return false;
      }
      text = number ? "true" : "false";
      return true;
    }
    default:
      number = 0;
      return true;
  }
}

}  // namespace

bool better_for_auto(const bp_device *a, const bp_device *b) {
  int ra = type_rank(a->type), rb = type_rank(b->type);
  if (ra != rb) return ra < rb;
  return a->memory_total > b->memory_total;
}

bp_status fill_params(bp_device *dev, const parsed_spec &spec, const std::string &context, resolved_spec &out) {
  const bp_plugin *p = owner(dev);
  for (const spec_param &given : spec.params) {
    if (given.key == "device" || given.key == "id") continue;
    bool known = std::any_of(p->params.begin(), p->params.end(),
                             [&](const bp_param_info &i) { return given.key == i.name; });
    if (!known)
      return fail_at(context, given.column, BP_ERR_INVALID_ARGUMENT,
                     "unknown key '" + given.key + "' for plugin '" + p->name + "'; it accepts " + describe_keys(p));
  }
  out.device = dev;
  out.texts.clear();
  out.values.clear();
  std::vector<int64_t> numbers;
  for (const bp_param_info &info : p->params) {
    const spec_param *given = spec.find(info.name);
    std::string text = given ? given->value : info.default_value;
    int64_t number = 0;
    std::string why;
    if (!check_value(info, text, number, why)) {
      if (given) return fail_at(context, given->column, BP_ERR_INVALID_ARGUMENT, why);
      return bp::core::set_error(BP_ERR_INTERNAL, "plugin '" + p->name + "': default of '" + info.name + "': " + why);
    }
    out.texts.push_back(std::move(text));
    numbers.push_back(number);
  }
  // Pointers into |texts| are taken only now, after it stopped growing.
  for (size_t i = 0; i < p->params.size(); ++i) {
    const bp_param_info &info = p->params[i];
    out.values.push_back(bp_param_value{info.name, info.type, numbers[i], out.texts[i].c_str()});
  }
  return BP_OK;
}

namespace {

std::string at_column(const std::string &context, size_t column, const std::string &cause) {
  return "bad " + context + " at column " + std::to_string(column) + ": " + cause;
}

// Picks the device |spec| names (state_mutex held by the caller). Returns the
// status and fills |message| instead of recording it: recording logs, and a
// log callback must never run under the state lock.
bp_status pick_device_locked(const parsed_spec &spec, const std::string &context, bp_device *&dev,
                             std::string &message) {
  const spec_param *index = spec.find("device");
  const spec_param *id = spec.find("id");
  if (spec.name == "auto") {
    if (index || id) {
      message = at_column(context, (index ? index : id)->column,
                          "'auto' picks the device itself; drop device=/id= or name the plugin");
      return BP_ERR_INVALID_ARGUMENT;
    }
    for (auto &p : state().plugins)
      for (auto &d : p->devices)
        if (!d->lost.load() && (!dev || better_for_auto(d.get(), dev))) dev = d.get();
    if (dev) return BP_OK;
    message = context + ": 'auto' found no device: no plugin loaded any device here; run bp-devices to see what "
                        "was refused";
    return BP_ERR_NOT_FOUND;
  }
  bp_plugin *p = find_by_name_locked(spec.name);
  if (!p) {
    std::string loaded, refused;
    for (auto &q : state().plugins) loaded += (loaded.empty() ? "" : ", ") + q->name;
    const std::string file = "/libbp-" + spec.name + ".so";
    for (auto &r : state().rejected)
      if (r.path.size() >= file.size() && r.path.compare(r.path.size() - file.size(), file.size(), file) == 0)
        refused = "; " + r.path + " was refused: " + r.message;
    message = context + ": no plugin named '" + spec.name + "' is loaded (loaded: " +
              (loaded.empty() ? "none" : loaded) + ")" + refused +
              (refused.empty() ? "; run bp-devices to see every plugin and refusal" : "");
    return BP_ERR_NOT_FOUND;
  }
  if (p->devices.empty()) {
    message = context + ": plugin '" + p->name + "' has no devices on this machine" +
              (p->enumerate_message.empty() ? std::string() : " (" + p->enumerate_message + ")");
    return p->enumerate_status != BP_OK && p->enumerate_status != BP_ERR_FAILED_PRECONDITION ? p->enumerate_status
                                                                                              : BP_ERR_UNAVAILABLE;
  }
  if (index && id) {
    message = at_column(context, id->column, "give a device index or id=, not both");
    return BP_ERR_INVALID_ARGUMENT;
  }
  if (index) {
    int64_t want = -1;
    if (!parse_int64(index->value, &want) || want < 0) {
      message = at_column(context, index->column, "device index '" + index->value + "' is not a non-negative integer");
      return BP_ERR_INVALID_ARGUMENT;
    }
    for (auto &d : p->devices)
      if (static_cast<int64_t>(d->index) == want) dev = d.get();
    if (dev) return BP_OK;
    message = context + ": plugin '" + p->name + "' has no device " + index->value + "; valid: " +
              std::to_string(p->devices.front()->index) + ".." + std::to_string(p->devices.back()->index) + ": " +
              describe_devices(p);
    return BP_ERR_NOT_FOUND;
  }
  if (id) {
    for (auto &d : p->devices)
      if (d->id == id->value) dev = d.get();
    if (dev) return BP_OK;
    message = context + ": plugin '" + p->name + "' has no device with id '" + id->value +
              "'; devices: " + describe_devices(p);
    return BP_ERR_NOT_FOUND;
  }
  dev = p->devices.front().get();
  return BP_OK;
}

}  // namespace

bp_status resolve_spec(const parsed_spec &spec, const std::string &context, resolved_spec &out) {
  bp_device *dev = nullptr;
  std::string message;
  bp_status st;
  // Only the plugin the spec names is loaded and enumerated (all of them
  // for "auto"). A name no file provides loads the others too, so the
  // message below lists every plugin there is.
  if (spec.name == "auto") {
    if (bp_status ls = ensure_all_loaded()) return ls;
    ensure_all_devices();
  } else {
    if (bp_status ls = ensure_named_loaded(spec.name)) return ls;
    bool found;
    {
      std::lock_guard<std::mutex> lock(state().state_mutex);
      found = find_by_name_locked(spec.name) != nullptr;
    }
    if (!found)
      if (bp_status ls = ensure_all_loaded()) return ls;
    ensure_devices_named(spec.name);
  }
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    st = pick_device_locked(spec, context, dev, message);
    // Retained under the state lock, so an unload cannot slip in before the
    // backend holds its own reference.
    if (st == BP_OK) bp::core::plugin_retain(dev->plugin);
  }
  if (st != BP_OK) return bp::core::set_error(st, message);
  st = fill_params(dev, spec, context, out);
  if (st != BP_OK) bp::core::plugin_release(dev->plugin);
  return st;
}

}  // namespace bp::registry
