// errors.cpp: backplane.Error and one subclass per bp_status, raised with
// the C message (bp_last_error) unchanged.
#include "common.hpp"

namespace bppy {
namespace {

// Strong references kept for the life of the process (never decref'ed at exit).
PyObject *g_classes[BP_STATUS_COUNT_];

struct ClassDef {
  bp_status status;
  const char *name;
  const char *builtin;  // a Python built-in exception it also derives from, or ""
  const char *doc;
};

const ClassDef kClasses[] = {
    {BP_ERR_INVALID_ARGUMENT, "InvalidArgument", "ValueError", "A bad shape, type, spec string or argument."},
    {BP_ERR_NOT_FOUND, "NotFound", "LookupError", "No such plugin, device, file, key or tensor."},
    {BP_ERR_UNAVAILABLE, "Unavailable", "", "No hardware or driver here."},
    {BP_ERR_INCOMPATIBLE, "Incompatible", "", "Not a plugin, another ABI, a bad table."},
    {BP_ERR_UNIMPLEMENTED, "Unimplemented", "NotImplementedError", "An op or entry the device does not support."},
    {BP_ERR_DEVICE_LOST, "DeviceLost", "", "The device is lost; every later call on it fails."},
    {BP_ERR_ALREADY_EXISTS, "AlreadyExists", "", "A duplicate plugin, key or tensor name."},
    {BP_ERR_FAILED_PRECONDITION, "FailedPrecondition", "", "The object is in the wrong state for the call."},
    {BP_ERR_RESOURCE_EXHAUSTED, "ResourceExhausted", "", "A fixed capacity was reached; the message names it."},
    {BP_ERR_INTERNAL, "Internal", "", "A bug, or an exception inside a plugin."},
};

}  // namespace

void throw_last(bp_status st) { throw Error{st, bp_last_error()}; }

void throw_last() {
  bp_status st = bp_last_status();
  std::string msg = bp_last_error();
  if (st == BP_OK) throw Error{BP_ERR_INTERNAL, "a call returned nothing but reported no error"};
  throw Error{st, msg};
}

void fail(bp_status st, const std::string &message) { throw Error{st, message}; }

void register_errors(py::module_ &m) {
  py::object type = py::module_::import("builtins").attr("type");
  py::object exc = py::module_::import("builtins").attr("Exception");
  py::dict base_ns;
  base_ns["__doc__"] =
      "A failed Backplane call. status (int), status_name (str) and message (the C library's "
      "bp_last_error(), unchanged; also str(e)).";
  base_ns["__module__"] = "backplane";
  py::object base = type("Error", py::make_tuple(exc), base_ns);
  m.attr("Error") = base;
  auto make = [&](const char *name, py::tuple bases, const char *doc) {
    py::dict ns;
    ns["__doc__"] = doc;
    ns["__module__"] = "backplane";
    py::object cls = type(name, bases, ns);
    m.attr(name) = cls;
    return cls;
  };
  for (auto &g : g_classes) g = base.inc_ref().ptr();
  for (const auto &c : kClasses) {
    py::tuple bases =
        *c.builtin ? py::make_tuple(base, py::module_::import("builtins").attr(c.builtin)) : py::make_tuple(base);
    g_classes[c.status] = make(c.name, bases, c.doc).inc_ref().ptr();
  }
  py::object oom = make("OutOfMemory", py::make_tuple(base, py::module_::import("builtins").attr("MemoryError")),
                        "Out of host or device memory.");
  g_classes[BP_ERR_OUT_OF_HOST_MEMORY] =
      make("OutOfHostMemory", py::make_tuple(oom), "Out of host memory.").inc_ref().ptr();
  g_classes[BP_ERR_OUT_OF_DEVICE_MEMORY] =
      make("OutOfDeviceMemory", py::make_tuple(oom), "Out of device memory.").inc_ref().ptr();

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error &e) {
      bp_status st = e.status > 0 && e.status < BP_STATUS_COUNT_ ? e.status : BP_ERR_INTERNAL;
      py::object cls = py::reinterpret_borrow<py::object>(g_classes[st]);
      py::object inst = cls(e.message);
      inst.attr("status") = e.status;
      inst.attr("status_name") = bp_status_name(e.status);
      inst.attr("message") = e.message;
      PyErr_SetObject(cls.ptr(), inst.ptr());
    }
  });
}

}  // namespace bppy
