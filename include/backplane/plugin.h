/* plugin.h: the Backplane plugin ABI, version 1.3.
 *
 * What it is: the C interface tables a device plugin (libbp-<name>.so)
 * exports and the host services table the core lends it. A plugin is built
 * from this header and tensor.h (the tensor struct, types, status codes)
 * alone and links nothing of Backplane. What it is not: an API for
 * applications (backplane.h), which a plugin never includes.
 *
 * A plugin exports exactly two symbols, declared at the end of this header
 * and defined in C99 or C++ exactly as written there:
 *   const bp_plugin_descriptor_t bp_plugin_descriptor = BP_PLUGIN_DESCRIPTOR(
 *       "name", "1.0.0", "one line");                  (data, read first)
 *   const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host,
 *                                      bp_error *err) { ... }
 * The core reads the descriptor after dlopen and before running any plugin
 * function (ELF constructors of the file do run at dlopen: keep none).
 *
 * Start-up cost: init runs when the plugin is loaded, for every process that
 * loads plugins, so it must be cheap (no driver or instance creation).
 * Device discovery belongs in the optional enumerate slot, which the host
 * calls once, when one of the plugin's devices is first listed or asked for.
 *
 * Objects: plugin -> device -> backend; device -> buffer type -> buffer;
 * device -> event. Each object is a pair (iface table, ctx pointer). Every
 * table starts with struct_size; slots are only appended within a major, and
 * the host never calls a slot beyond the plugin's struct_size. Slots marked
 * (optional) may be NULL and the host supplies the documented default.
 *
 * Rules (docs/plugin-contract.md numbers them PLG-n):
 *  - Every slot returns a status or a plain value and never throws, aborts or
 *    longjmps. Messages go into the caller-owned |err| (may be NULL).
 *  - No non-trivial static initializers, no process-global hooks (atexit,
 *    signal or terminate handlers), no thread-local state (it would dangle
 *    after unload).
 *  - The core validates shapes and types before a plugin sees a graph.
 *  - Strings a plugin returns are static or live until the plugin's
 *    shutdown; the host copies what it keeps.
 *
 * The plugin to copy: examples/plugin-c/plugin.c, walked through in
 * docs/plugin-guide.md (plugins/cpu/ is the full-size one to read).
 */
#ifndef BACKPLANE_PLUGIN_H_
#define BACKPLANE_PLUGIN_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backplane/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BP_PLUGIN_ABI_VERSION 1 /* major: a mismatch is refused */
/* minor: appended slots only, and an older plugin keeps working (the host
 * reads its descriptor's abi_minor). 1: bp_plugin_i.enumerate. 2:
 * bp_plugin_i.init_with_host; ROPE's optional src[2] (frequency factors),
 * which the host never shows a plugin of minor < 2 (supports_op answers
 * "no" for it on that plugin's behalf). 3: the host table's tracing slots
 * (trace_enabled, trace_now, trace_node). 4: the ATTENTION and SET_ROWS ops,
 * which the host never shows a plugin of minor < 4. */
#define BP_PLUGIN_ABI_MINOR 4
#define BP_PLUGIN_MAGIC 0x4C504250u /* "BPPL" little-endian */
#define BP_PLUGIN_DESCRIPTOR_SYMBOL "bp_plugin_descriptor"
#define BP_PLUGIN_ENTRY_SYMBOL "bp_plugin_entry"

#define BP_ERROR_MESSAGE_MAX 512

/* Caller-owned error detail; the plugin fills it, never allocates it. */
typedef struct bp_error {
  bp_status code;
  char message[BP_ERROR_MESSAGE_MAX];
} bp_error;

/* Plugin descriptor flags: how the plugin was built. The host refuses a
 * sanitizer build it cannot host, naming the flag. */
enum {
  BP_PLUGIN_FLAG_ASAN = 1u << 0,
  BP_PLUGIN_FLAG_TSAN = 1u << 1,
  BP_PLUGIN_FLAG_DEBUG = 1u << 2
};

/* The flags of the translation unit that expands it: put it in the
 * descriptor's |flags| so they always match how the plugin was compiled. */
#if defined(__SANITIZE_ADDRESS__)
#define BP_PLUGIN_BUILT_ASAN_ BP_PLUGIN_FLAG_ASAN
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BP_PLUGIN_BUILT_ASAN_ BP_PLUGIN_FLAG_ASAN
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define BP_PLUGIN_BUILT_TSAN_ BP_PLUGIN_FLAG_TSAN
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BP_PLUGIN_BUILT_TSAN_ BP_PLUGIN_FLAG_TSAN
#endif
#endif
#ifndef BP_PLUGIN_BUILT_ASAN_
#define BP_PLUGIN_BUILT_ASAN_ 0u
#endif
#ifndef BP_PLUGIN_BUILT_TSAN_
#define BP_PLUGIN_BUILT_TSAN_ 0u
#endif
#ifdef NDEBUG
#define BP_PLUGIN_BUILT_DEBUG_ 0u
#else
#define BP_PLUGIN_BUILT_DEBUG_ BP_PLUGIN_FLAG_DEBUG
#endif
#define BP_PLUGIN_BUILD_FLAGS ((uint32_t)(BP_PLUGIN_BUILT_ASAN_ | BP_PLUGIN_BUILT_TSAN_ | BP_PLUGIN_BUILT_DEBUG_))

/* Const data exported as "bp_plugin_descriptor" (the type carries _t so the
 * object can have the plain name in C). Static storage. Initialise it with
 * BP_PLUGIN_DESCRIPTOR so the sizes, magic, versions and build flags are
 * always the ones this header defines. */
typedef struct bp_plugin_descriptor_t {
  uint32_t struct_size; /* sizeof(bp_plugin_descriptor_t) as built */
  uint32_t magic;       /* BP_PLUGIN_MAGIC */
  uint32_t abi_major;   /* BP_PLUGIN_ABI_VERSION the plugin was built for */
  uint32_t abi_minor;
  const char *name;     /* [a-z0-9_]+, at most 31 chars, unique */
  const char *version;  /* free text, e.g. "1.0.0" */
  const char *description;
  uint32_t flags;       /* BP_PLUGIN_BUILD_FLAGS of the plugin's own build */
} bp_plugin_descriptor_t;

/* The one way to fill a descriptor: string literals (static storage). */
#define BP_PLUGIN_DESCRIPTOR(name, version, description)                                          \
  {                                                                                               \
    (uint32_t)sizeof(bp_plugin_descriptor_t), BP_PLUGIN_MAGIC, BP_PLUGIN_ABI_VERSION,             \
        BP_PLUGIN_ABI_MINOR, (name), (version), (description), BP_PLUGIN_BUILD_FLAGS              \
  }

struct bp_trace_node_span; /* below: what trace_node records */

/* Services the host lends; valid from bp_plugin_entry until shutdown returns.
 * A plugin must not call a slot beyond the host's struct_size. */
typedef struct bp_host_api {
  uint32_t struct_size;
  uint32_t abi_major, abi_minor;
  void *host; /* pass back as the first argument */
  /* Logs one line through the host's sink. Copied; thread-safe. */
  void (*log)(void *host, bp_log_level level, const char *message);
  /* True when |level| would be printed (skip formatting otherwise). */
  int (*log_enabled)(void *host, bp_log_level level);
  /* ---- ABI 1.3: tracing (docs/performance.md, "Tracing") ---- */
  /* Nonzero while the application records a trace. Cheap (one atomic load):
   * ask once per graph and skip every other trace call when it says no. */
  int (*trace_enabled)(void *host);
  /* The trace clock, in nanoseconds: the host's steady clock, which every
   * span's begin_ns and end_ns must use. A device that times its own work
   * maps its timestamps onto this clock before it reports them. */
  uint64_t (*trace_now)(void *host);
  /* Records one node span (copied; |span| is borrowed for the call). The host
   * adds the op, types, shapes, bytes and FLOPs from span->node. Thread-safe:
   * each worker thread may report its own part. */
  void (*trace_node)(void *host, const struct bp_trace_node_span *span);
} bp_host_api;

/* The thread value of a span that covers a whole node on the backend's queue
 * (from the start of its first part to the end of its last). */
#define BP_TRACE_WHOLE_NODE (-1)

/* A span of node work that a plugin reports through bp_host_api.trace_node
 * (ABI 1.3). Starts with struct_size so fields can be appended; the host
 * reads no further than it. A plugin reports, per node it runs, one span with
 * thread = BP_TRACE_WHOLE_NODE (the per-op summary counts these) and, when
 * the node runs on several threads, one span per thread with its index. */
typedef struct bp_trace_node_span {
  uint32_t struct_size; /* sizeof(bp_trace_node_span) as the plugin was built */
  int32_t thread;       /* worker index 0.. (0: the thread that called compute), or BP_TRACE_WHOLE_NODE */
  void *backend;        /* the backend's ctx, as backend_init returned it: names the track */
  const bp_tensor *node;
  uint64_t begin_ns, end_ns; /* trace_now's clock */
} bp_trace_node_span;

/* Key/value pairs the core parsed and validated against the plugin's schema.
 * Every declared parameter is present (defaults filled in). Borrowed; valid
 * during the call. */
typedef struct bp_param_value {
  const char *name;
  bp_param_type type;
  int64_t int_value;   /* INT and BOOL (0/1) */
  const char *string_value; /* every type: the text form */
} bp_param_value;

/* What graph compute receives: the nodes to run, in order. Borrowed; valid
 * during the call (and until synchronize for async compute). */
typedef struct bp_graph_desc {
  uint32_t struct_size;
  uint32_t n_nodes;
  bp_tensor *const *nodes;
} bp_graph_desc;

struct bp_buffer_i;
struct bp_buffer_type_i;
struct bp_backend_i;
struct bp_event_i;
struct bp_device_i;

typedef struct bp_buffer_ref { const struct bp_buffer_i *iface; void *ctx; } bp_buffer_ref;
typedef struct bp_buffer_type_ref { const struct bp_buffer_type_i *iface; void *ctx; } bp_buffer_type_ref;
typedef struct bp_backend_ref { const struct bp_backend_i *iface; void *ctx; } bp_backend_ref;
typedef struct bp_event_ref { const struct bp_event_i *iface; void *ctx; } bp_event_ref;
typedef struct bp_device_ref { const struct bp_device_i *iface; void *ctx; } bp_device_ref;

/* ---- buffer: memory of one buffer type ---------------------------------- */
typedef struct bp_buffer_i {
  uint32_t struct_size;
  /* Releases the buffer. Never fails. Host owns |buf| until this call. */
  void (*free)(void *buf);
  /* Base address; tensors get data = base + offset. Opaque for device memory. */
  void *(*base)(void *buf);
  /* (optional) Prepares |t| after the host set t->data inside this buffer
   * (may set t->extra, owned by the buffer). Default: nothing. */
  bp_status (*init_tensor)(void *buf, bp_tensor *t, bp_error *err);
  /* Copies |size| bytes from host |data| to byte |offset| of |t|. |data| is
   * borrowed for the call. Range already checked by the host. */
  bp_status (*set_tensor)(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size, bp_error *err);
  bp_status (*get_tensor)(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size, bp_error *err);
  /* (optional) Fills bytes of |t|. Default: set_tensor from a host scratch. */
  bp_status (*memset_tensor)(void *buf, bp_tensor *t, uint8_t value, size_t offset, size_t size, bp_error *err);
  /* (optional) Copies |src| (in another buffer of THIS plugin) into |dst| in
   * this buffer. Return UNIMPLEMENTED to make the host copy through host memory. */
  bp_status (*copy_tensor)(void *buf, const bp_tensor *src, bp_tensor *dst, bp_error *err);
  /* Fills the whole buffer with |value|. */
  bp_status (*clear)(void *buf, uint8_t value, bp_error *err);
  /* (optional) Forgets per-tensor state (t->extra) before reuse. */
  void (*reset)(void *buf);
  /* (optional) Hint: BP_BUFFER_USAGE_*. */
  void (*set_usage)(void *buf, bp_buffer_usage usage);
} bp_buffer_i;

/* ---- buffer type: a kind of memory of a device -------------------------- */
typedef struct bp_buffer_type_i {
  uint32_t struct_size;
  /* Static or lives until shutdown. */
  const char *(*name)(void *buft);
  /* Allocates |size| bytes (size 0 allowed). Host owns *out and releases it
   * with out->iface->free. OUT_OF_DEVICE_MEMORY / OUT_OF_HOST_MEMORY. */
  bp_status (*alloc)(void *buft, size_t size, bp_buffer_ref *out, bp_error *err);
  /* Required alignment of tensor offsets (a power of two). */
  size_t (*alignment)(void *buft);
  /* (optional) Largest single buffer. Default SIZE_MAX. */
  size_t (*max_size)(void *buft);
  /* (optional) Bytes |t| needs. Default bp_tensor_nbytes(t). */
  size_t (*alloc_size)(void *buft, const bp_tensor *t);
  /* (optional) Nonzero when base() is a host pointer. Default 0. */
  int (*is_host)(void *buft);
} bp_buffer_type_i;

/* ---- event: a point in a backend's queue -------------------------------- */
typedef struct bp_event_i {
  uint32_t struct_size;
  /* Waits on the host until the recorded work finished. */
  bp_status (*synchronize)(void *event, bp_error *err);
  void (*free)(void *event); /* never fails */
} bp_event_i;

/* ---- backend: an instance of a device that runs graphs ------------------ */
typedef struct bp_backend_i {
  uint32_t struct_size;
  /* Releases the backend after finishing its work. Never fails. */
  void (*free)(void *backend);
  /* The default buffer type (borrowed; lives until plugin shutdown). */
  bp_buffer_type_ref (*buffer_type)(void *backend);
  /* (optional) Queue transfers. |data| borrowed until synchronize. Default:
   * host calls the buffer's sync set/get after synchronize. */
  bp_status (*set_tensor_async)(void *backend, bp_tensor *t, const void *data, size_t offset, size_t size,
                                bp_error *err);
  bp_status (*get_tensor_async)(void *backend, const bp_tensor *t, void *data, size_t offset, size_t size,
                                bp_error *err);
  /* (optional) Async copy between two backends of THIS plugin; UNIMPLEMENTED
   * makes the host fall back to a synchronous copy. */
  bp_status (*copy_tensor_async)(void *backend_src, void *backend_dst, const bp_tensor *src, bp_tensor *dst,
                                 bp_error *err);
  /* (optional) Waits for all queued work. Default: nothing (sync backend). */
  bp_status (*synchronize)(void *backend, bp_error *err);
  /* (optional) Graph plans: pre-built executables for repeated graphs. */
  bp_status (*graph_plan_create)(void *backend, const bp_graph_desc *graph, void **out_plan, bp_error *err);
  void (*graph_plan_free)(void *backend, void *plan);
  bp_status (*graph_plan_compute)(void *backend, void *plan, bp_error *err);
  /* Runs |graph| (may return before it finishes when the device is async;
   * synchronize waits). Views and leaves (bp_op_is_view) must be skipped. */
  bp_status (*graph_compute)(void *backend, const bp_graph_desc *graph, bp_error *err);
  /* Nonzero when this backend can run node |op| as it is (types, layout). */
  int (*supports_op)(void *backend, const bp_tensor *op);
  /* Nonzero when this backend can use memory of |buft| directly. */
  int (*supports_buft)(void *backend, bp_buffer_type_ref buft);
  /* (optional) Nonzero to pull |op| here even when its weights are in host
   * memory (worth the copy). Default 0. */
  int (*offload_op)(void *backend, const bp_tensor *op);
  /* (optional) Events; present iff the device has BP_DEVICE_CAP_EVENTS. */
  bp_status (*event_record)(void *backend, void *event, bp_error *err);
  bp_status (*event_wait)(void *backend, void *event, bp_error *err);
} bp_backend_i;

/* ---- device ------------------------------------------------------------- */
typedef struct bp_device_props {
  uint32_t struct_size; /* host sets; plugin fills what fits */
  const char *name;     /* short, e.g. "CPU" */
  const char *description;
  const char *id;       /* stable id: UUID, PCI bus id, else plugin-made */
  bp_device_type type;
  uint32_t caps;        /* BP_DEVICE_CAP_* */
  uint64_t memory_total, memory_free;
} bp_device_props;

typedef struct bp_device_i {
  uint32_t struct_size;
  /* Fills |out|. Strings live until plugin shutdown. */
  bp_status (*get_props)(void *dev, bp_device_props *out, bp_error *err);
  /* Creates a backend. |params| has every schema parameter (defaults
   * filled). Host owns *out and frees it with out->iface->free. */
  bp_status (*backend_init)(void *dev, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                            bp_error *err);
  /* The default buffer type; lives until plugin shutdown. */
  bp_buffer_type_ref (*buffer_type)(void *dev);
  /* (optional) Pinned host buffer type; iface NULL if none. */
  bp_buffer_type_ref (*host_buffer_type)(void *dev);
  /* (optional) Wraps caller memory |ptr| (which outlives the buffer). */
  bp_status (*buffer_from_host_ptr)(void *dev, void *ptr, size_t size, bp_buffer_ref *out, bp_error *err);
  /* (optional) New event. Host owns; frees with out->iface->free. */
  bp_status (*event_new)(void *dev, bp_event_ref *out, bp_error *err);
  /* ---- ABI 1.3 ---- */
  /* (optional; the host checks struct_size) Buffer type for constant
   * weights, in a layout of the plugin's choosing for the ops that read
   * them: set_tensor and get_tensor convert, so the host always sees the
   * tensor's plain bytes. A backend that computes on it must say so in
   * supports_buft and turn down the ops it cannot read it in. iface NULL if
   * none; lives until shutdown. */
  bp_buffer_type_ref (*weight_buffer_type)(void *dev);
} bp_device_i;

/* ---- plugin ------------------------------------------------------------- */
typedef struct bp_plugin_i {
  uint32_t struct_size;
  /* Sets up plugin-wide state. Zero devices is success (hot-plug); no
   * hardware is UNAVAILABLE. Host calls shutdown once iff this succeeded.
   * A host of ABI 1.2 calls init_with_host instead when the table has it. */
  bp_status (*init)(void **out_plugin, bp_error *err);
  /* Called exactly once, before dlclose, after every object was freed. */
  void (*shutdown)(void *plugin);
  uint32_t (*device_count)(void *plugin);
  /* Device |index| < device_count; lives until shutdown. */
  bp_status (*device_get)(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err);
  /* Parameters accepted by backend_init ("device" and "id" are reserved for
   * the host). Static or lives until shutdown; may be NULL if n_params == 0. */
  const bp_param_info *params;
  uint32_t n_params;
  /* ---- ABI 1.1 ---- */
  /* (optional) Finds the devices. The host calls it once, before the first
   * device_count, when one of this plugin's devices is first listed or asked
   * for (never at load): expensive discovery (a Vulkan instance, OpenCL
   * platforms) goes here so an application that asks for another plugin
   * never pays for it. UNAVAILABLE: no usable driver or hardware; the plugin
   * stays loaded with no devices and bp-devices shows the message. Default:
   * nothing (device_count is enough). */
  bp_status (*enumerate)(void *plugin, bp_error *err);
  /* ---- ABI 1.2 ---- */
  /* (optional) init, given the host table: the very |host| that
   * bp_plugin_entry received, valid until shutdown returns, so the plugin
   * keeps it in its own state (no global). When the table's struct_size
   * reaches this slot and it is non-NULL, the host calls it instead of init
   * (never both); same contract as init otherwise. Default: init (a plugin
   * of ABI 1.1 or older). A plugin that has it still fills init, which a
   * host of ABI 1.1 calls (no host table then: the plugin cannot log). */
  bp_status (*init_with_host)(const bp_host_api *host, void **out_plugin, bp_error *err);
} bp_plugin_i;

/* Signature of the exported entry. Returns NULL (with |err| filled) when it
 * cannot serve |host_abi| or the host table is too old. */
typedef const bp_plugin_i *(*bp_plugin_entry_fn)(uint32_t host_abi, const bp_host_api *host, bp_error *err);

/* Fills |err| if non-NULL; returns |code|. Plugins use it to report. */
static inline bp_status bp_error_set(bp_error *err, bp_status code, const char *message) {
  if (err) {
    size_t i = 0;
    err->code = code;
    if (message)
      for (; message[i] && i + 1 < BP_ERROR_MESSAGE_MAX; ++i) err->message[i] = message[i];
    err->message[i] = '\0';
  }
  return code;
}

#if defined(__GNUC__)
#define BP_PLUGIN_PRINTF_(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define BP_PLUGIN_PRINTF_(fmt_index, first_arg)
#endif

/* printf-style bp_error_set: the message is formatted into |err| (cut at
 * BP_ERROR_MESSAGE_MAX - 1 bytes). Returns |code|. */
static inline bp_status bp_error_setf(bp_error *err, bp_status code, const char *fmt, ...) BP_PLUGIN_PRINTF_(3, 4);
static inline bp_status bp_error_setf(bp_error *err, bp_status code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, BP_ERROR_MESSAGE_MAX, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* printf-style log line through |host| (the table bp_plugin_entry received;
 * NULL logs nothing). Formats nothing when the host says |level| is off. Do
 * not start the line with the plugin's name: the host adds it. Lines longer
 * than 1023 bytes are cut. */
static inline void bp_host_logf(const bp_host_api *host, bp_log_level level, const char *fmt, ...) BP_PLUGIN_PRINTF_(3, 4);
static inline void bp_host_logf(const bp_host_api *host, bp_log_level level, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  if (!host || host->struct_size < offsetof(bp_host_api, log) + sizeof(host->log) || !host->log) return;
  if (host->struct_size >= offsetof(bp_host_api, log_enabled) + sizeof(host->log_enabled) && host->log_enabled &&
      !host->log_enabled(host->host, level))
    return;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  host->log(host->host, level, line);
}

/* Nonzero when |host| (the table bp_plugin_entry received; may be NULL) has
 * the tracing slots of ABI 1.3 and records a trace now. */
static inline int bp_host_trace_enabled(const bp_host_api *host) {
  if (!host || host->struct_size < offsetof(bp_host_api, trace_node) + sizeof(host->trace_node)) return 0;
  return host->trace_enabled && host->trace_now && host->trace_node && host->trace_enabled(host->host);
}

/* The trace clock (ns); call it only after bp_host_trace_enabled said yes. */
static inline uint64_t bp_host_trace_now(const bp_host_api *host) { return host->trace_now(host->host); }

/* Reports a span of |node| on |backend| (its ctx) by |thread|; call it only
 * after bp_host_trace_enabled said yes. */
static inline void bp_host_trace_node(const bp_host_api *host, void *backend, const bp_tensor *node, int32_t thread,
                                      uint64_t begin_ns, uint64_t end_ns) {
  bp_trace_node_span span;
  span.struct_size = (uint32_t)sizeof span;
  span.thread = thread;
  span.backend = backend;
  span.node = node;
  span.begin_ns = begin_ns;
  span.end_ns = end_ns;
  host->trace_node(host->host, &span);
}

#if defined(__GNUC__)
#define BP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define BP_PLUGIN_EXPORT
#endif

/* The two exports, declared here so a plugin defines them as written above
 * (and -Wmissing-prototypes stays quiet). The host never references them.
 * BP_PLUGIN_NO_EXPORT_DECLS skips them (the host's own test fixtures that
 * export malformed descriptors define it). */
#ifndef BP_PLUGIN_NO_EXPORT_DECLS
BP_PLUGIN_EXPORT extern const bp_plugin_descriptor_t bp_plugin_descriptor;
BP_PLUGIN_EXPORT const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err);
#endif

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_PLUGIN_H_ */
