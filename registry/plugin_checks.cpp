// plugin_checks.cpp: validates what a plugin declares, before trusting it.
//
// The descriptor is read before any plugin function runs (PLG-2); the table
// from bp_plugin_entry and its parameter schema are checked once, at load,
// so no NULL required slot or malformed schema is ever used later (PLG-5,
// PLG-7). Rule numbers refer to docs/plugin-contract.md.
#include <cinttypes>
#include <cstring>
#include <set>

#include "abi/tables.hpp"
#include "backplane/version.h"  // BP_VERSION_STRING
#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool k_host_asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool k_host_asan = true;
#else
constexpr bool k_host_asan = false;
#endif
#else
constexpr bool k_host_asan = false;
#endif

#if defined(__SANITIZE_THREAD__)
constexpr bool k_host_tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool k_host_tsan = true;
#else
constexpr bool k_host_tsan = false;
#endif
#else
constexpr bool k_host_tsan = false;
#endif

std::string base_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A string from plugin memory, read with a bound (it may be unterminated).
std::string bounded(const char *s, size_t max) {
  if (!s) return {};
  return std::string(s, strnlen(s, max));
}

bp_status incompatible(std::string &message, std::string text) {
  message = std::move(text);
  return BP_ERR_INCOMPATIBLE;
}

// Checks one declared parameter and copies it into |p|.
bp_status copy_param(bp_plugin *p, const bp_param_info &in, std::set<std::string> &seen, std::string &message) {
  const std::string who = "plugin '" + p->name + "': parameter ";
  std::string name = bounded(in.name, k_spec_max_name + 2);
  if (!is_valid_identifier(name))
    return incompatible(message, who + "name '" + name + "' is not [a-z0-9_]{1,31} (PLG-7)");
  if (name == "device" || name == "id")
    return incompatible(message, who + "'" + name + "' is reserved for the host (device index / stable id) (PLG-7)");
  if (!seen.insert(name).second) return incompatible(message, who + "'" + name + "' is declared twice (PLG-7)");
  // Read as an integer first: loading 77 into a bp_param_type is undefined.
  int32_t type = 0;
  static_assert(sizeof type == sizeof in.type, "bp_param_type is 32 bits");
  std::memcpy(&type, &in.type, sizeof type);
  if (type != BP_PARAM_INT && type != BP_PARAM_BOOL && type != BP_PARAM_STRING)
    return incompatible(message, who + "'" + name + "' has unknown type " + std::to_string(type) + " (PLG-7)");
  std::string def = bounded(in.default_value, 256);
  if (type == BP_PARAM_INT) {
    if (in.min_value > in.max_value)
      return incompatible(message, who + "'" + name + "' has min " + std::to_string(in.min_value) + " > max " +
                                       std::to_string(in.max_value) + " (PLG-7)");
    int64_t v = 0;
    if (!def.empty() && !parse_int64(def, &v))
      return incompatible(message, who + "'" + name + "' default '" + def + "' is not an integer (PLG-7)");
    bool bounded_range = !(in.min_value == 0 && in.max_value == 0);
    if (!def.empty() && bounded_range && (v < in.min_value || v > in.max_value))
      return incompatible(message, who + "'" + name + "' default " + def + " is outside " +
                                       std::to_string(in.min_value) + ".." + std::to_string(in.max_value) +
                                       " (PLG-7)");
  } else if (type == BP_PARAM_BOOL) {
    if (!def.empty() && def != "true" && def != "false" && def != "0" && def != "1")
      return incompatible(message, who + "'" + name + "' default '" + def + "' is not true/false (PLG-7)");
  }
  bp_param_info copy{};
  copy.struct_size = sizeof(bp_param_info);
  copy.name = p->strings.emplace_back(name).c_str();
  copy.type = static_cast<bp_param_type>(type);
  copy.default_value = p->strings.emplace_back(def).c_str();
  copy.doc = p->strings.emplace_back(bounded(in.doc, 512)).c_str();
  copy.min_value = in.min_value;
  copy.max_value = in.max_value;
  p->params.push_back(copy);
  return BP_OK;
}

}  // namespace

// A descriptor string: NULL is allowed (empty) unless |required|; anything
// else must lie in the plugin's image and is read at most |max| bytes, never
// past the end of its segment.
bool image_string(const image_ranges &image, const char *s, size_t max, std::string &out) {
  out.clear();
  if (!s) return true;
  size_t room = image.room(s);
  if (room == 0) return false;
  out.assign(s, strnlen(s, room < max ? room : max));
  return true;
}

bp_status check_descriptor(const void *d_in, const std::string &path, const image_ranges &image,
                           descriptor_strings &out, std::string &message) {
  const std::string file = base_name(path);
  // The symbol was found in the file itself; its whole struct must be too.
  if (!image.contains(d_in, sizeof(bp_plugin_descriptor_t)))
    return incompatible(message, file + ": the " BP_PLUGIN_DESCRIPTOR_SYMBOL " symbol does not lie within the "
                                        "file's loaded image (PLG-2)");
  // A compiler always aligns the struct; a file whose symbol sits at an odd
  // address was made by hand. Refused, and the fields are read from a copy
  // below in any case (never through a misaligned pointer).
  const auto addr = reinterpret_cast<uintptr_t>(d_in);
  if (addr % alignof(bp_plugin_descriptor_t) != 0) {
    char where[32];
    std::snprintf(where, sizeof where, "%p", d_in);
    return incompatible(message, file + ": the " BP_PLUGIN_DESCRIPTOR_SYMBOL " symbol at " + where +
                                     " is not aligned for bp_plugin_descriptor_t (" +
                                     std::to_string(alignof(bp_plugin_descriptor_t)) +
                                     " bytes): not a descriptor a compiler made (PLG-2)");
  }
  bp_plugin_descriptor_t copy;
  std::memcpy(&copy, d_in, sizeof copy);
  const bp_plugin_descriptor_t *d = &copy;
  out.abi_major = d->abi_major;
  out.abi_minor = d->abi_minor;
  if (d->magic != BP_PLUGIN_MAGIC) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: bad descriptor magic 0x%08X (expected 0x%08X): not a Backplane plugin (PLG-2)",
                  file.c_str(), d->magic, BP_PLUGIN_MAGIC);
    return incompatible(message, buf);
  }
  if (d->abi_major != BP_PLUGIN_ABI_VERSION) {
    const std::string both = "plugin " + file + " was built for ABI " + std::to_string(d->abi_major) +
                             ", this Backplane speaks ABI " + std::to_string(BP_PLUGIN_ABI_VERSION) + ": ";
    if (d->abi_major < BP_PLUGIN_ABI_VERSION)
      return incompatible(message, both + "the plugin is older; rebuild it against this Backplane's plugin.h "
                                          "(ABI " + std::to_string(BP_PLUGIN_ABI_VERSION) + ") (PLG-2)");
    return incompatible(message, both + "this Backplane is older; upgrade Backplane to one that speaks ABI " +
                                     std::to_string(d->abi_major) + ", or rebuild the plugin against Backplane " +
                                     BP_VERSION_STRING + " (PLG-2)");
  }
  if (d->struct_size < sizeof(bp_plugin_descriptor_t))
    return incompatible(message, file + ": descriptor is " + std::to_string(d->struct_size) + " bytes, ABI " +
                                     std::to_string(BP_PLUGIN_ABI_VERSION) + " needs at least " +
                                     std::to_string(sizeof(bp_plugin_descriptor_t)) + " (PLG-2)");
  // Pointers first: nothing is read through one outside the plugin's file.
  const struct {
    const char *field;
    const char *value;
    size_t max;
    std::string *to;
  } strings[] = {{"name", d->name, 64, &out.name},
                 {"version", d->version, 64, &out.version},
                 {"description", d->description, 1024, &out.description}};
  for (const auto &f : strings) {
    if (!image_string(image, f.value, f.max, *f.to)) {
      char where[32];
      std::snprintf(where, sizeof where, "%p", static_cast<const void *>(f.value));
      return incompatible(message, file + ": descriptor field '" + f.field + "' points to " + where +
                                       ", outside the plugin's own file: use a string literal (PLG-2)");
    }
  }
  const std::string &name = out.name;
  if (!is_valid_identifier(name)) {
    // Say how long an over-long name is: one cut for display must not look
    // like a valid-length name with a bad character.
    std::string length;
    if (name.size() > k_spec_max_name)
      length = " (" + (name.size() >= 64 ? std::string("64 or more") : std::to_string(name.size())) + " characters)";
    return incompatible(message, file + ": plugin name " + quote_for_message(name) + length +
                                     " is invalid: names are [a-z0-9_]+, 1 to 31 characters (PLG-3)");
  }
  if (name == "auto")
    return incompatible(message, file + ": plugin name 'auto' is reserved for automatic selection (PLG-3)");
  if ((d->flags & BP_PLUGIN_FLAG_ASAN) && !k_host_asan)
    return incompatible(message, "plugin '" + name + "' was built with AddressSanitizer and this Backplane was not: "
                                     "rebuild the plugin without -fsanitize=address, or build Backplane with "
                                     "-DBP_SANITIZE=address (PLG-6)");
  if ((d->flags & BP_PLUGIN_FLAG_TSAN) && !k_host_tsan)
    return incompatible(message, "plugin '" + name + "' was built with ThreadSanitizer and this Backplane was not: "
                                     "rebuild the plugin without -fsanitize=thread, or build Backplane with "
                                     "-DBP_SANITIZE=thread (PLG-6)");
  if (!(d->flags & BP_PLUGIN_FLAG_TSAN) && k_host_tsan)
    bp::core::logf(BP_LOG_WARN, "registry", "plugin '%s' was not built with ThreadSanitizer; expect false reports",
                   name.c_str());
  return BP_OK;
}

bp_status check_plugin_table(bp_plugin *p, const bp_plugin_i *iface, std::string &message) {
  const std::string who = "plugin '" + p->name + "': ";
  std::string why = bp::abi::check_table(bp::abi::plugin_table, iface);
  if (!why.empty()) return incompatible(message, who + why);
  if (iface->n_params > k_max_params_per_plugin)
    return incompatible(message, who + "declares " + std::to_string(iface->n_params) + " parameters, the limit is " +
                                     std::to_string(k_max_params_per_plugin) + " (PLG-7)");
  if (iface->n_params > 0 && !iface->params)
    return incompatible(message, who + "n_params is " + std::to_string(iface->n_params) + " but params is NULL (PLG-7)");
  if (iface->n_params == 0) return BP_OK;
  // Entries may be longer than ours (a newer minor): step by their size,
  // which is bounded so that a bogus size (0x7fffffff) is refused instead
  // of walking far outside the array.
  const size_t stride = iface->params[0].struct_size;
  constexpr size_t k_max_stride = 16 * sizeof(bp_param_info);
  if (stride < sizeof(bp_param_info) || stride > k_max_stride)
    return incompatible(message, who + "bp_param_info.struct_size is " + std::to_string(stride) + ", ABI " +
                                     std::to_string(BP_PLUGIN_ABI_VERSION) + " needs " +
                                     std::to_string(sizeof(bp_param_info)) + " to " + std::to_string(k_max_stride) +
                                     " (PLG-7)");
  std::set<std::string> seen;
  const auto *bytes = reinterpret_cast<const unsigned char *>(iface->params);
  for (uint32_t i = 0; i < iface->n_params; ++i) {
    const auto *info = reinterpret_cast<const bp_param_info *>(bytes + i * stride);
    if (info->struct_size != stride)
      return incompatible(message, who + "bp_param_info entries have different struct_size (PLG-7)");
    bp_status st = copy_param(p, *info, seen, message);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

}  // namespace bp::registry
