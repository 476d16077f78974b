/* plugin.c: a complete Backplane plugin in C99, "cexample".
 *
 * One CPU device on plain host memory that runs ADD, MUL (src1 broadcast over
 * src0) and SCALE on F32 tensors of any layout, with one parameter:
 * "cexample:trace=1" logs every node it runs through the host's log.
 *
 * It shows the smallest thing the host accepts: the two exports, the plugin,
 * device, backend, buffer type and buffer tables with only their required
 * slots (plus is_host, so the scheduler can copy between it and cpu), and
 * errors reported through bp_error, never by aborting.
 *
 * Build with CMakeLists.txt here, or: cc -std=c99 -O2 -shared -fPIC plugin.c
 * -o libbp-cexample.so $(pkg-config --cflags --libs backplane-plugin).
 * Use: BP_PLUGIN_PATH=$PWD bp-devices; bp-run --device "cexample;cpu" */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/plugin.h>

#define ALIGNMENT 64

/* Plugin-wide state: the host's services, handed to init_with_host (ABI
 * 1.2) and valid until shutdown returns. Kept here, not in a global. */
typedef struct plugin_state {
  const bp_host_api *host; /* NULL under a host of ABI 1.1 (no logging then) */
} plugin_state;

static void log_line(const bp_host_api *host, bp_log_level level, const char *msg) {
  if (host && host->log) host->log(host->host, level, msg);
}

/* ---- buffer: one block of host memory ---------------------------------- */
typedef struct host_buffer {
  void *data;
  size_t size;
} host_buffer;

static void buffer_free(void *buf) {
  host_buffer *b = (host_buffer *)buf;
  if (b) free(b->data);
  free(b);
}

static void *buffer_base(void *buf) { return ((host_buffer *)buf)->data; }

/* The host checked the range already; a plugin checks again rather than
 * write outside its memory on a host bug. */
static int in_range(const host_buffer *b, const bp_tensor *t, size_t offset, size_t size) {
  const char *base = (const char *)b->data, *p = (const char *)t->data;
  return p >= base && (size_t)(p - base) <= b->size && offset <= b->size - (size_t)(p - base) &&
         size <= b->size - (size_t)(p - base) - offset;
}

static bp_status buffer_set_tensor(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size,
                                   bp_error *err) {
  if (!in_range((host_buffer *)buf, t, offset, size))
    return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "cexample: set_tensor outside its buffer");
  if (size) memcpy((char *)t->data + offset, data, size);
  return BP_OK;
}

static bp_status buffer_get_tensor(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size,
                                   bp_error *err) {
  if (!in_range((host_buffer *)buf, t, offset, size))
    return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "cexample: get_tensor outside its buffer");
  if (size) memcpy(data, (const char *)t->data + offset, size);
  return BP_OK;
}

static bp_status buffer_clear(void *buf, uint8_t value, bp_error *err) {
  host_buffer *b = (host_buffer *)buf;
  (void)err;
  if (b->size) memset(b->data, value, b->size);
  return BP_OK;
}

/* Designated initializers: slots not named are NULL, i.e. "not supported". */
static const bp_buffer_i buffer_iface = {.struct_size = sizeof(bp_buffer_i),
                                         .free = buffer_free,
                                         .base = buffer_base,
                                         .set_tensor = buffer_set_tensor,
                                         .get_tensor = buffer_get_tensor,
                                         .clear = buffer_clear};

/* ---- buffer type --------------------------------------------------------- */
static const char *buft_name(void *buft) { return (void)buft, "CEXAMPLE"; }

static bp_status buft_alloc(void *buft, size_t size, bp_buffer_ref *out, bp_error *err) {
  host_buffer *b = (host_buffer *)calloc(1, sizeof *b);
  (void)buft;
  out->iface = NULL;
  out->ctx = NULL;
  /* Size 0 still gets a real block, so base() is a valid pointer. */
  if (!b || posix_memalign(&b->data, ALIGNMENT, size ? size : ALIGNMENT) != 0) {
    free(b);
    return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "cexample: out of host memory");
  }
  b->size = size;
  out->iface = &buffer_iface;
  out->ctx = b;
  return BP_OK;
}

static size_t buft_alignment(void *buft) { return (void)buft, ALIGNMENT; }

static int buft_is_host(void *buft) { return (void)buft, 1; }

static const bp_buffer_type_i buffer_type_iface = {.struct_size = sizeof(bp_buffer_type_i),
                                                   .name = buft_name,
                                                   .alloc = buft_alloc,
                                                   .alignment = buft_alignment,
                                                   .is_host = buft_is_host};
static const bp_buffer_type_ref buffer_type = {&buffer_type_iface, NULL};

/* ---- backend: runs graphs ------------------------------------------------ */
typedef struct backend {
  int trace;               /* the "trace" parameter */
  const bp_host_api *host; /* from the plugin state, for the trace lines */
} backend;

static void backend_free(void *be) { free(be); }

static bp_buffer_type_ref backend_buffer_type(void *be) {
  (void)be;
  return buffer_type;
}

/* The element of |t| at index (i0, i1, i2, i3), with broadcasting: a
 * dimension of size 1 repeats (src1 of ADD and MUL). */
static float *at(const bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return (float *)((char *)t->data + (size_t)(i0 % t->ne[0]) * t->nb[0] + (size_t)(i1 % t->ne[1]) * t->nb[1] +
                   (size_t)(i2 % t->ne[2]) * t->nb[2] + (size_t)(i3 % t->ne[3]) * t->nb[3]);
}

static int backend_supports_op(void *be, const bp_tensor *op) {
  int n_src = op->op == BP_OP_SCALE ? 1 : 2, i;
  (void)be;
  if (op->op != BP_OP_ADD && op->op != BP_OP_MUL && op->op != BP_OP_SCALE) return 0;
  if (op->type != BP_TYPE_F32) return 0;
  for (i = 0; i < n_src; ++i)
    if (!op->src[i] || op->src[i]->type != BP_TYPE_F32) return 0;
  return 1;
}

static bp_status run_node(const bp_tensor *node) {
  const bp_tensor *a = node->src[0], *b = node->src[1];
  float s = node->op == BP_OP_SCALE ? bp_tensor_param_f32(node, 0) : 0.0f;
  int64_t i0, i1, i2, i3;
  for (i3 = 0; i3 < node->ne[3]; ++i3)
    for (i2 = 0; i2 < node->ne[2]; ++i2)
      for (i1 = 0; i1 < node->ne[1]; ++i1)
        for (i0 = 0; i0 < node->ne[0]; ++i0) {
          float x = *at(a, i0, i1, i2, i3);
          float *y = at(node, i0, i1, i2, i3);
          if (node->op == BP_OP_ADD)
            *y = x + *at(b, i0, i1, i2, i3);
          else if (node->op == BP_OP_MUL)
            *y = x * *at(b, i0, i1, i2, i3);
          else /* SCALE */
            *y = x * s;
        }
  return BP_OK;
}

static bp_status backend_graph_compute(void *be, const bp_graph_desc *graph, bp_error *err) {
  const backend *self = (const backend *)be;
  uint32_t i;
  for (i = 0; i < graph->n_nodes; ++i) {
    const bp_tensor *node = graph->nodes[i];
    char msg[BP_ERROR_MESSAGE_MAX];
    if (bp_op_is_view(node->op)) continue; /* leaves and views compute nothing */
    if (!backend_supports_op(be, node)) {
      snprintf(msg, sizeof msg, "cexample: node '%s' (op %d) is not supported; supports_op said no", node->name,
               (int)node->op);
      return bp_error_set(err, BP_ERR_UNIMPLEMENTED, msg);
    }
    if (self->trace) {
      snprintf(msg, sizeof msg, "cexample: node %u '%s' op %d, %lld elements", i, node->name, (int)node->op,
               (long long)bp_tensor_nelements(node));
      log_line(self->host, BP_LOG_INFO, msg);
    }
    run_node(node);
  }
  return BP_OK;
}

static int backend_supports_buft(void *be, bp_buffer_type_ref buft) {
  (void)be;
  return buft.iface == &buffer_type_iface;
}

/* A synchronous backend: no async transfers, graph plans or events. */
static const bp_backend_i backend_iface = {.struct_size = sizeof(bp_backend_i),
                                           .free = backend_free,
                                           .buffer_type = backend_buffer_type,
                                           .graph_compute = backend_graph_compute,
                                           .supports_op = backend_supports_op,
                                           .supports_buft = backend_supports_buft};

/* ---- device ------------------------------------------------------------- */
static bp_status device_get_props(void *dev, bp_device_props *out, bp_error *err) {
  bp_device_props p;
  size_t n = out->struct_size < sizeof p ? out->struct_size : sizeof p;
  (void)dev;
  (void)err;
  /* Fill a full local copy and hand over only what the host's (maybe older,
   * smaller) struct has room for. */
  memset(&p, 0, sizeof p);
  p.struct_size = out->struct_size;
  p.name = "CEXAMPLE";
  p.description = "example plugin in C: ADD, MUL, SCALE on F32 in host memory";
  p.id = "cexample-0";
  p.type = BP_DEVICE_TYPE_CPU;
  p.caps = BP_DEVICE_CAP_HOST_MEMORY;
  memcpy(out, &p, n);
  return BP_OK;
}

static bp_status device_backend_init(void *dev, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                                     bp_error *err) {
  backend *be = (backend *)calloc(1, sizeof *be);
  uint32_t i;
  out->iface = NULL;
  out->ctx = NULL;
  if (!be) return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "cexample: out of host memory");
  be->host = dev ? ((const plugin_state *)dev)->host : NULL; /* the device ctx is the plugin state */
  /* The host validated the values against params_schema and filled in
   * defaults: every declared parameter is here. */
  for (i = 0; i < n_params; ++i)
    if (strcmp(params[i].name, "trace") == 0) be->trace = params[i].int_value != 0;
  out->iface = &backend_iface;
  out->ctx = be;
  return BP_OK;
}

static bp_buffer_type_ref device_buffer_type(void *dev) {
  (void)dev;
  return buffer_type;
}

static const bp_device_i device_iface = {.struct_size = sizeof(bp_device_i),
                                         .get_props = device_get_props,
                                         .backend_init = device_backend_init,
                                         .buffer_type = device_buffer_type};

/* ---- plugin ------------------------------------------------------------- */
static const bp_param_info params_schema[] = {
    {sizeof(bp_param_info), "trace", BP_PARAM_BOOL, "0", "log every node this backend runs (at info level)", 0, 1},
};

/* The host calls this instead of init (ABI 1.2): it keeps |host|. */
static bp_status plugin_init_with_host(const bp_host_api *host, void **out_plugin, bp_error *err) {
  plugin_state *s = (plugin_state *)calloc(1, sizeof *s);
  *out_plugin = s;
  if (!s) return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "cexample: out of host memory");
  s->host = host;
  return BP_OK;
}

/* What a host of ABI 1.1, which has no init_with_host, calls. */
static bp_status plugin_init(void **out_plugin, bp_error *err) { return plugin_init_with_host(NULL, out_plugin, err); }

static void plugin_shutdown(void *plugin) { free(plugin); }

static uint32_t plugin_device_count(void *plugin) {
  (void)plugin;
  return 1;
}

static bp_status plugin_device_get(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err) {
  if (index != 0) return bp_error_set(err, BP_ERR_NOT_FOUND, "cexample: there is one device, 0");
  out->iface = &device_iface;
  out->ctx = plugin; /* the one device's ctx: the plugin state */
  return BP_OK;
}

/* No enumerate slot: the one device needs no discovery. */
static const bp_plugin_i plugin_iface = {.struct_size = sizeof(bp_plugin_i),
                                         .init = plugin_init,
                                         .shutdown = plugin_shutdown,
                                         .device_count = plugin_device_count,
                                         .device_get = plugin_device_get,
                                         .params = params_schema,
                                         .n_params = sizeof params_schema / sizeof params_schema[0],
                                         .init_with_host = plugin_init_with_host};

/* ---- the two exports, exactly as plugin.h declares them ----------------- */
const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("cexample", "1.0.0", "example plugin in C: ADD, MUL, SCALE on F32");

const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  if (host_abi != BP_PLUGIN_ABI_VERSION) {
    bp_error_set(err, BP_ERR_INCOMPATIBLE, "cexample: built for another plugin ABI; rebuild it");
    return NULL;
  }
  /* The log slot exists in every host of ABI 1; a slot appended later would
   * need host->struct_size checked first. init_with_host gets |host| again. */
  (void)host;
  return &plugin_iface;
}
