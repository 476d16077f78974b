// device.cpp: discovery of every device of every OpenCL platform, their
// properties, the context and transfer queue (created on first use) and
// backend creation from the validated parameters.
#include <CL/cl.h>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend.hpp"
#include "backplane/plugin_guard.hpp"
#include "opencl.hpp"
#include "plugin_common.hpp"

namespace bp::opencl {
namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  s.resize(std::strlen(s.c_str()));
  return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (clGetDeviceInfo(d, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  s.resize(std::strlen(s.c_str()));
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what, T fallback) {
  T v{};
  return clGetDeviceInfo(d, what, sizeof v, &v, nullptr) == CL_SUCCESS ? v : fallback;
}

// cl_khr_device_uuid: the driver's own 16-byte device UUID when it has one.
constexpr cl_device_info kDeviceUuidKhr = 0x106A;

// A stable id: the driver's UUID when offered, else a string made of what
// stays the same across runs (platform name, device name, index among the
// devices of that name on that platform); spaces become '-'.
std::string stable_id(device_state &d, const std::string &extensions, uint32_t same_name_index) {
  if (extensions.find("cl_khr_device_uuid") != std::string::npos) {
    unsigned char uuid[16] = {};
    if (clGetDeviceInfo(d.device, kDeviceUuidKhr, sizeof uuid, uuid, nullptr) == CL_SUCCESS) {
      char s[40];
      std::snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
                    uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10], uuid[11],
                    uuid[12], uuid[13], uuid[14], uuid[15]);
      bool all_zero = true;
      for (unsigned char c : uuid) all_zero = all_zero && c == 0;
      if (!all_zero) return s;
    }
  }
  std::string id = "opencl-" + d.platform_name + "-" + d.name + "-" + std::to_string(same_name_index);
  for (char &c : id)
    if (c == ' ' || c == ',' || c == ';' || c == '=' || static_cast<unsigned char>(c) < 0x21 ||
        static_cast<unsigned char>(c) > 0x7e)
      c = '-';
  return id;
}

bp_device_type type_of(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return BP_DEVICE_TYPE_GPU;
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return BP_DEVICE_TYPE_ACCEL;
  if (t & CL_DEVICE_TYPE_CPU) return BP_DEVICE_TYPE_CPU;
  return BP_DEVICE_TYPE_ACCEL;
}

std::unique_ptr<device_state> describe(plugin_state *plugin, cl_platform_id p, cl_device_id d) {
  auto dev = std::make_unique<device_state>();
  dev->plugin = plugin;
  dev->platform = p;
  dev->device = d;
  dev->platform_name = platform_string(p, CL_PLATFORM_NAME);
  dev->name = device_string(d, CL_DEVICE_NAME);
  dev->vendor = device_string(d, CL_DEVICE_VENDOR);
  dev->version = device_string(d, CL_DEVICE_VERSION);
  dev->driver_version = device_string(d, CL_DRIVER_VERSION);
  dev->c_version = device_string(d, CL_DEVICE_OPENCL_C_VERSION);
  const std::string ext = device_string(d, CL_DEVICE_EXTENSIONS);
  dev->fp16 = ext.find("cl_khr_fp16") != std::string::npos;
  dev->type = type_of(device_value<cl_device_type>(d, CL_DEVICE_TYPE, CL_DEVICE_TYPE_GPU));
  dev->compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS, 1);
  dev->global_mem = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE, 0);
  dev->max_alloc = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, 0);
  dev->max_work_group = device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, 1);
  dev->vector_width = device_value<cl_uint>(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, 4);
  // The base address alignment is in bits; tensors start at multiples of it
  // so any of them could become a sub-buffer, and never below 128 bytes
  // (a float16 vector) so vector loads of a tensor's start are aligned.
  const cl_uint align_bits = device_value<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, 1024);
  dev->alignment = align_bits / 8 < 128 ? 128 : align_bits / 8;
  dev->id = ext;  // replaced below, once the same-name index is known
  char desc[512];
  std::snprintf(desc, sizeof desc, "%s (%s; %s; %s; %u CUs; %" PRIu64 " MiB, max alloc %" PRIu64 " MiB; f16 %s)",
                dev->name.c_str(), dev->vendor.c_str(), dev->platform_name.c_str(), dev->version.c_str(),
                dev->compute_units, dev->global_mem >> 20, dev->max_alloc >> 20,
                dev->fp16 ? "arithmetic" : "storage only");
  dev->description = desc;
  return dev;
}

// PoCL's CPU driver leaves its worker threads unpinned unless POCL_AFFINITY=1
// is in the environment when it starts, and then Linux often wakes both
// workers of a 2-core machine on one core: row ops ran at 55-65 GB/s instead
// of 85-93 (docs/plugins/opencl.md, "Memory and execution"). A plugin never changes
// the host process, so the environment is the user's: the plugin only says,
// once, at debug level, that the setting exists.
void hint_pocl_affinity(const bp_host_api *host, const std::string &platform_name) {
  if (platform_name.find("Portable Computing Language") == std::string::npos || std::getenv("POCL_AFFINITY")) return;
  bp_host_logf(host, BP_LOG_DEBUG,
               "PoCL's worker threads are unpinned; POCL_AFFINITY=1 in the environment before the process starts pins "
               "them (docs/plugins/opencl.md)");
}

}  // namespace

device_state::~device_state() {
  for (auto &[key, prog] : programs) clReleaseProgram(prog);
  if (transfer_queue) clReleaseCommandQueue(transfer_queue);
  if (context) clReleaseContext(context);
}

bp_status enumerate_devices(plugin_state *plugin, bp_error *err) {
  cl_uint n_platforms = 0;
  cl_int rc = clGetPlatformIDs(0, nullptr, &n_platforms);
  if (rc == kPlatformNotFoundKhr || (rc == CL_SUCCESS && n_platforms == 0))
    return bp_error_setf(err, BP_ERR_UNAVAILABLE,
                         "no OpenCL platform is installed (the ICD loader found no driver in /etc/OpenCL/vendors; "
                         "install one, e.g. pocl-opencl-icd)");
  if (rc != CL_SUCCESS)
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "clGetPlatformIDs failed: %s", cl_error_name(rc).c_str());
  std::vector<cl_platform_id> platforms(n_platforms);
  clGetPlatformIDs(n_platforms, platforms.data(), nullptr);
  for (cl_uint pi = 0; pi < n_platforms; ++pi) {
    hint_pocl_affinity(plugin->host, platform_string(platforms[pi], CL_PLATFORM_NAME));
    cl_uint n_devices = 0;
    rc = clGetDeviceIDs(platforms[pi], CL_DEVICE_TYPE_ALL, 0, nullptr, &n_devices);
    if (rc != CL_SUCCESS || n_devices == 0) {
      bp_host_logf(plugin->host, BP_LOG_INFO, "platform %u (%s) has no devices: %s", pi,
                   platform_string(platforms[pi], CL_PLATFORM_NAME).c_str(), cl_error_name(rc).c_str());
      continue;
    }
    std::vector<cl_device_id> ids(n_devices);
    clGetDeviceIDs(platforms[pi], CL_DEVICE_TYPE_ALL, n_devices, ids.data(), nullptr);
    for (cl_uint di = 0; di < n_devices; ++di) {
      auto dev = describe(plugin, platforms[pi], ids[di]);
      const std::string ext = dev->id;
      uint32_t same_name = 0;
      for (const auto &other : plugin->devices)
        if (other->platform == dev->platform && other->name == dev->name) ++same_name;
      dev->id = stable_id(*dev, ext, same_name);
      dev->index = static_cast<uint32_t>(plugin->devices.size());
      dev->platform_index = pi;
      dev->index_in_platform = di;
      plugin->devices.push_back(std::move(dev));
    }
  }
  bp_host_logf(plugin->host, BP_LOG_DEBUG, "%zu devices on %u platforms", plugin->devices.size(), n_platforms);
  return BP_OK;
}

bp_status device_check(const device_state *dev, bp_error *err) {
  if (!dev || !dev->lost.load(std::memory_order_acquire)) return BP_OK;
  return bp_error_setf(err, BP_ERR_DEVICE_LOST,
                       "device '%s' was lost; free its buffers, events and backends and create new ones",
                       dev->name.c_str());
}

bp_status device_fail(device_state *dev, cl_int rc, cl_site site, const std::string &what, bp_error *err) {
  const bp_status st = status_of(rc, site);
  if (st == BP_ERR_DEVICE_LOST && dev) {
    if (!dev->lost.exchange(true))
      bp_host_logf(dev->plugin->host, BP_LOG_ERROR, "device '%s' lost: %s: %s", dev->name.c_str(), what.c_str(),
                   cl_error_name(rc).c_str());
    return bp_error_setf(err, st, "device '%s' was lost: %s: %s", dev->name.c_str(), what.c_str(),
                         cl_error_name(rc).c_str());
  }
  return bp_error_setf(err, st, "%s: %s", what.c_str(), cl_error_name(rc).c_str());
}

bp_status device_open(device_state *dev, bp_error *err) {
  if (bp_status s = device_check(dev, err); s != BP_OK) return s;
  std::lock_guard<std::mutex> lock(dev->mu);
  if (dev->context) return BP_OK;
  cl_int rc = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(dev->platform),
                                         0};
  cl_context ctx = clCreateContext(props, 1, &dev->device, nullptr, nullptr, &rc);
  if (!ctx || rc != CL_SUCCESS) {
    if (rc == CL_DEVICE_NOT_AVAILABLE || rc == CL_OUT_OF_HOST_MEMORY)
      return device_fail(dev, rc, cl_site::setup, "creating a context", err);
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "cannot create a context on '%s': %s", dev->name.c_str(),
                         cl_error_name(rc).c_str());
  }
  cl_command_queue q = clCreateCommandQueue(ctx, dev->device, 0, &rc);
  if (!q || rc != CL_SUCCESS) {
    clReleaseContext(ctx);
    if (rc == CL_DEVICE_NOT_AVAILABLE || rc == CL_OUT_OF_HOST_MEMORY)
      return device_fail(dev, rc, cl_site::setup, "creating a queue", err);
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "cannot create a queue on '%s': %s", dev->name.c_str(),
                         cl_error_name(rc).c_str());
  }
  dev->context = ctx;
  dev->transfer_queue = q;
  bp_host_logf(dev->plugin->host, BP_LOG_DEBUG, "context created on %s", dev->name.c_str());
  return BP_OK;
}

namespace {

// The plugin's parts of plugins::device_slots.
struct cl_device {
  using device = device_state;
  // OpenCL has no portable "free memory" query: free = total.
  static plugins::device_facts facts(device_state &dev) {
    const uint32_t caps = BP_DEVICE_CAP_ASYNC | BP_DEVICE_CAP_EVENTS;
    return {dev.name.c_str(), dev.description.c_str(), dev.id.c_str(), dev.type, caps, dev.global_mem, dev.global_mem};
  }
  static bp_status backend_init(device_state *dev, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                                bp_error *err) {
    backend_options opt;
    if (const bp_param_value *p = plugins::find_param(params, n_params, "platform"); p && p->int_value >= 0) {
      // platform=P: the host's device index counts within platform P.
      const auto &all = dev->plugin->devices;
      const auto platform = static_cast<uint32_t>(p->int_value);
      const std::string group = "platform=" + std::to_string(platform);
      const std::string known =
          "platforms with devices: 0.." + std::to_string(all.empty() ? 0u : all.back()->platform_index);
      if (bp_status s = plugins::pick_in_group(
              all, dev->index, [&](const device_state &d) { return d.platform_index == platform; }, group.c_str(),
              known.c_str(), &dev, err);
          s != BP_OK)
        return s;
    }
    if (const bp_param_value *p = plugins::find_param(params, n_params, "cache")) opt.cache = p->int_value != 0;
    plugins::read_bool(params, n_params, "fuse", &opt.fuse);
    if (const bp_param_value *p = plugins::find_param(params, n_params, "cache_dir"); p && p->string_value)
      opt.cache_dir = p->string_value;
    if (bp_status s = plugins::read_choice(params, n_params, "matmul_cols", {1, 2, 4}, &opt.matmul_cols, err);
        s != BP_OK)
      return s;
    if (bp_status s = plugins::read_choice(params, n_params, "matmul_width", {4, 8, 16}, &opt.matmul_width, err);
        s != BP_OK)
      return s;
    if (bp_status s = plugins::read_named(params, n_params, "matmul", kMatmulNames, &opt.matmul, err); s != BP_OK)
      return s;
    if (bp_status s = plugins::read_named(params, n_params, "attention", kAttentionNames, &opt.attention, err);
        s != BP_OK)
      return s;
    return backend_create(dev, opt, out, err);
  }
  static constexpr auto event_new = event_create;
  static bp_buffer_type_ref buffer_type(device_state &dev) { return buffer_type_of(&dev); }
};

using slots = plugins::device_slots<cl_device>;

}  // namespace

const bp_device_i device_iface = slots::table();

}  // namespace bp::opencl
