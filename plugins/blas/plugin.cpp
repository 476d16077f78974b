// plugin.cpp: descriptor, entry point, plugin and device tables of the
// OpenBLAS plugin.
//
// The device is typed CPU (it computes on the host's cores and memory) and
// carries BP_DEVICE_CAP_HOST_MEMORY, so the scheduler shares tensors with the
// cpu backend instead of copying them. It is not a full CPU backend: only
// MUL_MAT is supported, so it is meant to sit before "cpu" in a list
// ("blas;cpu"). docs/plugins/blas.md explains the choice.
#include <dlfcn.h>

#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "blas.hpp"
#include "plugin_common.hpp"

namespace bp::blas {
namespace {

plugin_state *g_state = nullptr;  // set by init, cleared by shutdown

const char *const kDeviceName = "BLAS";
const char *const kDeviceId = "blas-0";

// Parameters accepted in a spec ("blas:threads=4,min_mnk=0"). Constant data.
const bp_param_info kParams[] = {
    {sizeof(bp_param_info), "threads", BP_PARAM_INT, "0",
     "threads this backend splits each product over (0 = one per core); each runs single-threaded sgemm", 0, 1024},
    {sizeof(bp_param_info), "min_mnk", BP_PARAM_INT, "32768",
     "smallest per-batch M*N*K this backend accepts; smaller products go to the next backend", 0, INT64_MAX},
};

// ---- device ---------------------------------------------------------------

bp_status dev_get_props(void *, bp_device_props *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "props output is NULL");
    // The host set struct_size; fill only what fits (older hosts).
    // Memory 0 = unknown: the device owns no memory of its own (it works in
    // host RAM, which the cpu device reports). This also keeps "auto", which
    // breaks ties between CPU devices by memory, on the full cpu backend
    // rather than on this MUL_MAT-only one.
    plugins::fill_props({kDeviceName, g_state ? g_state->description.c_str() : "OpenBLAS", kDeviceId,
                         BP_DEVICE_TYPE_CPU, BP_DEVICE_CAP_HOST_MEMORY | BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR, 0, 0},
                        out);
    return BP_OK;
  });
}

bp_status dev_backend_init(void *, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                           bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "backend output is NULL");
    *out = bp_backend_ref{nullptr, nullptr};
    int64_t threads = 0;  // one per core
    int64_t min_mnk = kDefaultMinMnk;
    if (bp_status s = plugins::read_int_in(params, n_params, "threads", 0, 1024, &threads, err); s != BP_OK) return s;
    if (bp_status s = plugins::read_int_in(params, n_params, "min_mnk", 0, INT64_MAX, &min_mnk, err); s != BP_OK)
      return s;
    if (threads == 0) threads = g_state ? g_state->default_threads : 1;
    auto *ctx = new backend_ctx(static_cast<int>(threads), min_mnk);
    ctx->host = g_state ? g_state->host : nullptr;
    *out = bp_backend_ref{&kBackendIface, ctx};
    return BP_OK;
  });
}

bp_buffer_type_ref dev_buffer_type(void *) noexcept { return host_buffer_type(); }

bp_status dev_buffer_from_host_ptr(void *, void *ptr, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status { return plugins::wrap_host_ptr(ptr, size, out, err); });
}

const bp_device_i kDeviceIface = {
    sizeof(bp_device_i),
    dev_get_props,
    dev_backend_init,
    dev_buffer_type,
    nullptr,  // host_buffer_type: the default type already is host memory
    dev_buffer_from_host_ptr,
    nullptr,  // event_new: sgemm runs synchronously
    nullptr,  // weight_buffer_type: sgemm reads the file's layout
};

// ---- plugin ---------------------------------------------------------------

// What init adds to the shared lifecycle (plugins/common/plugin_common.hpp):
// the one instance becomes g_state, which the device slots (ctx NULL) read.
bp_status setup(plugin_state &s, bp_error *err) {
  if (g_state) return bp_error_set(err, BP_ERR_FAILED_PRECONDITION, "already initialised");
  s.default_threads = static_cast<int>(plugins::count_cores());
  g_state = &s;
  return BP_OK;
}

using lifecycle = plugins::plugin_lifecycle<plugin_state, setup>;

void plugin_shutdown(void *plugin) noexcept {
  if (plugin == g_state) g_state = nullptr;
  lifecycle::shutdown(plugin);
}

// OpenBLAS picks its kernels ("core") from the CPU's model number when it
// loads, or from OPENBLAS_CORETYPE. On a model it does not know (a CPU newer
// than the library, or a VM that reports an unfamiliar one) it falls back to
// a core of an older, narrower ISA: on a 2-core AVX-512 VM, Debian's 0.3.21
// chose Prescott (SSE3) and ran sgemm at 1024^3 at 37-60 GFLOP/s, where
// OPENBLAS_CORETYPE=SkylakeX ran it at 200-246. The choice is made before
// the plugin can act (changing the environment of a running process is not
// the plugin's to do), so it names the cure: the core for the CPU's own
// vector ISA, or NULL when |core| already uses it (or is unknown here).
const char *better_coretype(const char *core) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!core) return nullptr;
  // OpenBLAS's x86-64 cores without AVX2 and FMA kernels.
  static const char *const narrow[] = {
      "Prescott", "Core2",        "Penryn",      "Dunnington", "Nehalem", "Atom",       "Barcelona", "Bobcat",
      "Opteron",  "Opteron_SSE3", "Sandybridge", "Bulldozer",  "Katmai",  "Coppermine", "Northwood", "Banias"};
  bool is_narrow = false;
  for (const char *n : narrow) is_narrow = is_narrow || strcasecmp(core, n) == 0;
  if (!is_narrow) return nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#else
  (void)core;
#endif
  return nullptr;
}

// Loads OpenBLAS (first use of the plugin's device, never at load); run
// once, by find_devices.
bp_status load_openblas(plugin_state *s, bp_error *err) {
  void *h = nullptr;
  const char *names[] = {"libopenblas.so.0", "libopenblas.so"};
  std::string tried;
  for (const char *name : names) {
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h) break;
    const char *why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
  }
  if (!h)
    return bp_error_set(err, BP_ERR_UNAVAILABLE,
                        ("OpenBLAS is not installed (" + tried + "); apt-get install libopenblas0").c_str());
  openblas_api api;
  api.sgemm = reinterpret_cast<decltype(api.sgemm)>(dlsym(h, "cblas_sgemm"));
  api.set_num_threads = reinterpret_cast<decltype(api.set_num_threads)>(dlsym(h, "openblas_set_num_threads"));
  api.get_corename = reinterpret_cast<decltype(api.get_corename)>(dlsym(h, "openblas_get_corename"));
  api.get_config = reinterpret_cast<decltype(api.get_config)>(dlsym(h, "openblas_get_config"));
  if (!api.sgemm || !api.set_num_threads)
    return bp_error_set(err, BP_ERR_UNAVAILABLE, "the libopenblas found lacks cblas_sgemm or openblas_set_num_threads");
  // Every sgemm runs on one of the backends' own threads (see plugin_state).
  api.set_num_threads(1);
  const char *core = api.get_corename ? api.get_corename() : nullptr;
  const char *config = api.get_config ? api.get_config() : nullptr;
  s->description = std::string("OpenBLAS sgemm on host memory (") + (config ? config : "?") + ", core " +
                   (core ? core : "?") + "), split over " + std::to_string(s->default_threads) + " threads by default";
  if (const char *better = better_coretype(core)) {
    const std::string cure = std::string("OPENBLAS_CORETYPE=") + better;
    s->description += "; this CPU runs wider kernels: start the program with " + cure;
    // Once per process (the library loads once), at info level: the plugin
    // works, only slower, so it is no problem of the installation (bp-devices
    // lists warnings as problems); the description says it to everyone who
    // lists the devices. A user who set the core on purpose is not told.
    if (!std::getenv("OPENBLAS_CORETYPE"))
      bp_host_logf(s->host, BP_LOG_INFO,
                   "OpenBLAS chose its %s kernels, narrower than this CPU's vector ISA (several times slower); "
                   "set %s in the environment before the program starts",
                   core, cure.c_str());
  }
  s->blas = api;
  return BP_OK;
}

// The device, found once by whichever of enumerate, device_count and
// device_get comes first (plugins/common/plugin_common.hpp).
bp_status find_devices(plugin_state *s, bp_error *err) {
  return s->found.once(err, [&](bp_error *e) { return load_openblas(s, e); });
}

bp_status plugin_enumerate(void *plugin, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!plugin) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "enumerate needs the plugin");
    return find_devices(static_cast<plugin_state *>(plugin), err);
  });
}

uint32_t plugin_device_count(void *plugin) noexcept {
  return plugin_guard_value(0u, [&] {
    auto *s = static_cast<plugin_state *>(plugin);
    if (!s) return 0u;
    find_devices(s, nullptr);  // a host of ABI 1.0 has no enumerate: the count comes first
    return s->blas.sgemm ? 1u : 0u;
  });
}

bp_status plugin_device_get(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err) noexcept {
  if (!out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "device output is NULL");
  if (index != 0 || plugin_device_count(plugin) == 0) {
    *out = bp_device_ref{nullptr, nullptr};
    return bp_error_set(err, BP_ERR_NOT_FOUND, "only device 0 exists");
  }
  *out = bp_device_ref{&kDeviceIface, nullptr};
  return BP_OK;
}

const bp_plugin_i kPluginIface = {
    sizeof(bp_plugin_i),
    lifecycle::init,
    plugin_shutdown,
    plugin_device_count,
    plugin_device_get,
    kParams,
    sizeof kParams / sizeof kParams[0],
    plugin_enumerate,
    lifecycle::init_with_host,
};

}  // namespace

const bp_plugin_i *plugin_table() { return &kPluginIface; }
plugin_state *state() { return g_state; }

}  // namespace bp::blas

// The exported symbols, defined as plugin.h declares them.
extern "C" const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("blas", "0.1.0", "MUL_MAT through OpenBLAS sgemm on host memory");

extern "C" const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  return bp::plugins::plugin_entry(host_abi, host, err, bp::blas::plugin_table());
}
