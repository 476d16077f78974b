// devices.cpp: plugins and devices as bp-devices --json lists them, and
// backends (Backend, backends()).
#include <cstdio>

#include "common.hpp"

namespace bppy {
namespace {

std::string str(const char *s) { return s ? s : ""; }

struct Param {
  std::string name, type, default_value, doc;
  py::object min_value = py::none(), max_value = py::none();
};

struct Device {
  bp_device *dev = nullptr;
  size_t index = 0;
  uint32_t plugin_index = 0;
  std::string plugin, id, spec, name, description, type;
  uint64_t memory_total = 0, memory_free = 0;
  std::vector<std::string> caps;
  uint32_t cap_bits = 0;
  std::vector<Param> params;
};

struct Plugin {
  std::string name, version, path, description, status, status_message;
  std::vector<Param> params;
  std::vector<size_t> devices;
};

struct Rejected {
  std::string path, status, message;
};

struct Backend {
  BackendP h;
  bp_backend *get() const {
    if (!h) fail(BP_ERR_FAILED_PRECONDITION, "this Backend was closed");
    return h->be;
  }
};

std::vector<std::string> cap_names(uint32_t caps) {
  static const struct {
    uint32_t bit;
    const char *name;
  } kCaps[] = {{BP_DEVICE_CAP_ASYNC, "async"},
               {BP_DEVICE_CAP_EVENTS, "events"},
               {BP_DEVICE_CAP_HOST_BUFFER, "host-buffer"},
               {BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR, "buffer-from-host-ptr"},
               {BP_DEVICE_CAP_HOST_MEMORY, "host-memory"}};
  std::vector<std::string> out;
  uint32_t known = 0;
  for (const auto &c : kCaps) {
    known |= c.bit;
    if (caps & c.bit) out.push_back(c.name);
  }
  if (caps & ~known) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "unknown-0x%x", caps & ~known);
    out.push_back(buf);
  }
  return out;
}

std::vector<Param> params_of(const bp_plugin *p) {
  std::vector<Param> out;
  size_t n = bp_plugin_param_count(p);
  for (size_t i = 0; i < n; ++i) {
    const bp_param_info *info = bp_plugin_param(p, i);
    if (!info) continue;
    Param r;
    r.name = str(info->name);
    r.type = info->type == BP_PARAM_INT ? "INT" : info->type == BP_PARAM_BOOL ? "BOOL" : "STRING";
    r.default_value = str(info->default_value);
    r.doc = str(info->doc);
    if (info->type == BP_PARAM_INT) {
      r.min_value = py::int_(info->min_value);
      r.max_value = py::int_(info->max_value);
    }
    out.push_back(std::move(r));
  }
  return out;
}

Device device_of(bp_device *dev) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  check(bp_device_describe(dev, &info));
  Device d;
  d.dev = dev;
  size_t n = bp_device_count();
  for (size_t i = 0; i < n; ++i)
    if (bp_device_get(i) == dev) d.index = i;
  d.plugin_index = info.index;
  d.plugin = str(bp_plugin_name(info.plugin));
  d.id = str(info.id);
  d.spec = str(info.spec);
  d.name = str(info.name);
  d.description = str(info.description);
  d.type = str(bp_device_type_name(info.type));
  d.memory_total = info.memory_total;
  d.memory_free = info.memory_free;
  d.cap_bits = info.caps;
  d.caps = cap_names(info.caps);
  d.params = params_of(info.plugin);
  return d;
}

std::vector<Device> list_devices() {
  check(bp_registry_discover());
  std::vector<Device> out;
  size_t n = bp_device_count();
  for (size_t i = 0; i < n; ++i) out.push_back(device_of(bp_device_get(i)));
  return out;
}

std::vector<Plugin> list_plugins() {
  check(bp_registry_discover());
  std::vector<Plugin> out;
  size_t n = bp_plugin_count();
  for (size_t i = 0; i < n; ++i) {
    bp_plugin *p = bp_plugin_get(i);
    Plugin r;
    r.name = str(bp_plugin_name(p));
    r.version = str(bp_plugin_version(p));
    r.path = str(bp_plugin_path(p));
    r.description = str(bp_plugin_description(p));
    r.params = params_of(p);
    const char *msg = nullptr;
    bp_status st = bp_plugin_status(p, &msg);
    r.status = bp_status_name(st);
    r.status_message = str(msg);
    size_t nd = bp_plugin_device_count(p), all = bp_device_count();
    for (size_t k = 0; k < nd; ++k) {
      bp_device *d = bp_plugin_device(p, k);
      for (size_t j = 0; j < all; ++j)
        if (bp_device_get(j) == d) r.devices.push_back(j);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Rejected> list_rejected() {
  check(bp_registry_discover());
  std::vector<Rejected> out;
  size_t n = bp_rejected_count();
  for (size_t i = 0; i < n; ++i) {
    const char *path = nullptr, *msg = nullptr;
    bp_status st = BP_OK;
    if (bp_rejected_get(i, &path, &st, &msg) != BP_OK) continue;
    out.push_back({str(path), bp_status_name(st), str(msg)});
  }
  return out;
}

Backend make_backend(const std::string &spec) {
  bp_backend *be = nullptr;
  call_nogil([&] { return bp_backend_new(spec.c_str(), &be); });
  return Backend{std::make_shared<BackendH>(be)};
}

std::vector<Backend> make_backends(const std::string &list) {
  std::vector<bp_backend *> out(64, nullptr);
  size_t n = 0;
  call_nogil([&] { return bp_backend_new_list(list.c_str(), out.data(), out.size(), &n); });
  std::vector<Backend> r;
  for (size_t i = 0; i < n; ++i) r.push_back(Backend{std::make_shared<BackendH>(out[i])});
  return r;
}

}  // namespace

BackendP backend_from(const py::handle &h) {
  if (py::isinstance<Backend>(h)) {
    const Backend &b = h.cast<const Backend &>();
    b.get();
    return b.h;
  }
  if (py::isinstance<py::str>(h)) return make_backend(h.cast<std::string>()).h;
  if (py::isinstance<Device>(h)) {
    bp_backend *be = nullptr;
    bp_device *dev = h.cast<const Device &>().dev;
    call_nogil([&] { return bp_backend_new_on_device(dev, "", &be); });
    return std::make_shared<BackendH>(be);
  }
  fail(BP_ERR_INVALID_ARGUMENT,
       "expected a Backend, a Device or a spec string, got " + py::str(py::type::of(h)).cast<std::string>());
}

std::vector<BackendP> backends_from(const py::handle &h) {
  std::vector<BackendP> out;
  if (py::isinstance<py::str>(h)) {
    for (auto &b : make_backends(h.cast<std::string>())) out.push_back(b.h);
  } else if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    for (auto item : h) {
      if (py::isinstance<py::str>(item)) {
        for (auto &b : make_backends(item.cast<std::string>())) out.push_back(b.h);
      } else {
        out.push_back(backend_from(item));
      }
    }
  } else {
    out.push_back(backend_from(h));
  }
  if (out.empty()) fail(BP_ERR_INVALID_ARGUMENT, "no backend given");
  return out;
}

bp_device *device_from(const py::handle &h, BackendP *keep) {
  if (py::isinstance<Device>(h)) return h.cast<const Device &>().dev;
  BackendP b = backend_from(h);
  if (keep) *keep = b;
  return bp_backend_device(b->be);
}

void init_devices(py::module_ &m) {
  py::class_<Param>(m, "Param", "A parameter a plugin accepts in a spec string (\"plugin:key=value\").")
      .def_readonly("name", &Param::name)
      .def_readonly("type", &Param::type)
      .def_readonly("default", &Param::default_value)
      .def_readonly("doc", &Param::doc)
      .def_readonly("min", &Param::min_value)
      .def_readonly("max", &Param::max_value)
      .def("__repr__", [](const Param &p) { return "Param('" + p.name + "', " + p.type + ")"; });

  py::class_<Device>(m, "Device", "A device of a loaded plugin (the facts of `bp-devices --json`).")
      .def_readonly("index", &Device::index)
      .def_readonly("plugin", &Device::plugin)
      .def_readonly("plugin_index", &Device::plugin_index)
      .def_readonly("id", &Device::id)
      .def_readonly("spec", &Device::spec)
      .def_readonly("name", &Device::name)
      .def_readonly("description", &Device::description)
      .def_readonly("type", &Device::type)
      .def_readonly("memory_total", &Device::memory_total)
      .def_readonly("memory_free", &Device::memory_free)
      .def_readonly("caps", &Device::caps)
      .def_readonly("params", &Device::params)
      .def_property_readonly("host_memory",
                             [](const Device &d) { return (d.cap_bits & BP_DEVICE_CAP_HOST_MEMORY) != 0; })
      .def(
          "backend",
          [](const Device &d, const std::string &params) {
            bp_backend *be = nullptr;
            call_nogil([&] { return bp_backend_new_on_device(d.dev, params.c_str(), &be); });
            return Backend{std::make_shared<BackendH>(be)};
          },
          py::arg("params") = "", "A new Backend on this device, with \"key=value,...\" parameters.")
      .def("__repr__", [](const Device &d) { return "Device('" + d.spec + "', '" + d.name + "')"; });

  py::class_<Plugin>(m, "Plugin", "A loaded plugin (the facts of `bp-devices --json`).")
      .def_readonly("name", &Plugin::name)
      .def_readonly("version", &Plugin::version)
      .def_readonly("path", &Plugin::path)
      .def_readonly("description", &Plugin::description)
      .def_readonly("params", &Plugin::params)
      .def_readonly("devices", &Plugin::devices, "Indices into devices().")
      .def_readonly("status", &Plugin::status)
      .def_readonly("status_message", &Plugin::status_message)
      .def("__repr__", [](const Plugin &p) { return "Plugin('" + p.name + "', '" + p.version + "')"; });

  py::class_<Rejected>(m, "Rejected", "A plugin candidate that discovery refused, and why.")
      .def_readonly("path", &Rejected::path)
      .def_readonly("status", &Rejected::status)
      .def_readonly("message", &Rejected::message);

  m.def("devices", &list_devices, "Every device of every loaded plugin, as bp-devices lists them.");
  m.def("plugins", &list_plugins, "Every loaded plugin, as bp-devices lists them.");
  m.def("rejected", &list_rejected, "The plugin candidates discovery refused.");
  m.def(
      "add_plugin_path", [](const std::string &folder) { check(bp_registry_add_path(folder.c_str())); },
      py::arg("folder"), "Adds a folder to the plugin search (bp_registry_add_path).");

  py::class_<Backend>(m, "Backend",
                      "A backend from a spec (\"cpu\", \"vulkan:0\", \"cpu:threads=2\"). Freed when no Python "
                      "object (and no scheduler) uses it; `with` or close() drops this object's reference.")
      .def(py::init(&make_backend), py::arg("spec") = "cpu")
      .def_property_readonly("name", [](const Backend &b) { return str(bp_backend_name(b.get())); })
      .def_property_readonly("device", [](const Backend &b) { return device_of(bp_backend_device(b.get())); })
      .def_property_readonly("alignment", [](const Backend &b) { return bp_backend_alignment(b.get()); })
      .def_property_readonly("closed", [](const Backend &b) { return !b.h; })
      .def("close", [](Backend &b) { b.h.reset(); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Backend &b, py::args) { b.h.reset(); })
      .def("__repr__", [](const Backend &b) {
        return b.h ? "Backend('" + str(bp_backend_name(b.h->be)) + "')" : "Backend(closed)";
      });
  m.def("backends", &make_backends, py::arg("specs"),
        "One Backend per spec of a ';' list, in order (bp_backend_new_list): a scheduler's priority list.");
}

}  // namespace bppy
