/* backplane.h: the public C API of Backplane (libbackplane.so).
 *
 * What it is: tensors and views, compute graphs, devices and backends that
 * come from plugins, buffers, events, the graph allocator, the multi-backend
 * scheduler, logging and errors. Pure C99, stable and bindable. The header
 * of applications (and of libraries built on them: model.h, gguf.h).
 * It includes tensor.h (status codes, types, ops, the tensor struct and its
 * inline helpers, shared with plugins) and, at its end, deprecated.h (the
 * 0.1 names; define BP_NO_DEPRECATED to hide them).
 * What it is not: the plugin ABI (plugins include plugin.h, which brings
 * tensor.h, and never this header) or a C++ API (backplane.hpp).
 *
 * Errors: calls return bp_status (BP_OK == 0); the status and message of the
 * last call on this thread are read with bp_last_status() and bp_last_error()
 * (a success leaves BP_OK and ""). Graph-building calls return NULL on invalid
 * input and record why; a NULL input makes them return NULL with the same
 * status and message, so a caller may check once at the end of a chain.
 * Nothing here aborts on user input.
 *
 * Threads: the registry (discovery, loading, listing plugins and devices,
 * bp_backend_new*), errors, logging, bp_quantize_rows / bp_dequantize and the
 * static-name functions may be called from any thread at once. Every other
 * object (context and its tensors, graph, buffer, backend, event, graph
 * plan, graph allocator, scheduler) is used by one thread at a time: the
 * application owns it and serialises its use; different objects, even of one
 * device, may be used from different threads at the same time.
 *
 * Lifetimes: a pointer a getter returns is borrowed; its comment says how
 * long it lives (with its owner object, while its plugin is loaded, or
 * static storage).
 *
 * Usage:
 *   bp_context *ctx = bp_context_new(0);
 *   bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
 *   bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 2);
 *   bp_tensor *c = bp_mul_mat(ctx, a, b);            // [3, 2]
 *   bp_graph *g = bp_graph_new(ctx, 0);
 *   bp_backend *be = NULL;
 *   if (!c || bp_graph_build(g, c) || bp_backend_new("cpu:threads=2", &be))
 *     fprintf(stderr, "%s\n", bp_last_error());
 *   bp_buffer *buf = NULL;
 *   bp_context_alloc_tensors(ctx, be, &buf);
 *   bp_tensor_set(a, a_data, 0, sizeof a_data); ...
 *   bp_backend_graph_compute(be, g);
 *   bp_tensor_get(c, out, 0, bp_tensor_nbytes(c));
 *   bp_buffer_free(buf); bp_backend_free(be); bp_graph_free(g); bp_context_free(ctx);
 */
#ifndef BACKPLANE_BACKPLANE_H_
#define BACKPLANE_BACKPLANE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backplane/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BP_BUILDING_CORE)
#define BP_API __attribute__((visibility("default")))
#else
#define BP_API
#endif

/* ------------------------------------------------------------------------ */
/* Errors. The status codes (bp_status, BP_OK, BP_ERR_*) are in tensor.h.  */

/* The outcome of the last call on this thread (docs/errors.md). Every
 * public function below replaces it on entry, so after a call that
 * succeeded bp_last_status() is BP_OK and bp_last_error() is "", and after
 * one that failed they hold that call's status and message. Exceptions:
 * - graph-building calls (bp_tensor_new*, views, ops, bp_tensor_set_name,
 *   bp_tensor_set_flags, bp_graph_build) given a NULL tensor or context return
 *   NULL / fail with the status and message of the previous call when it
 *   failed (the NULL is its result), else of the first graph-building call
 *   that failed on the same context since bp_clear_error(), so a whole graph
 *   may be checked once, at bp_graph_build;
 * - the functions that never fail leave the state alone: bp_last_error,
 *   bp_last_status, bp_clear_error, bp_status_name, bp_op_name,
 *   bp_device_type_name, bp_version, bp_version_string, bp_log_*.
 * Read both before the next Backplane call: it replaces them. */

/* Message of the last call on this thread ("" after a success). Borrowed;
 * valid until the next Backplane call on this thread. Thread-safe. */
BP_API const char *bp_last_error(void);
/* Status of the last call on this thread (BP_OK after a success): the
 * code for calls that return a pointer, a count or nothing. Thread-safe. */
BP_API bp_status bp_last_status(void);
/* Static name of a status code, e.g. "INVALID_ARGUMENT". */
BP_API const char *bp_status_name(bp_status status);
/* Forgets this thread's last status and message, and the first
 * graph-building failure every context remembers. */
BP_API void bp_clear_error(void);
/* Makes |status| (not BP_OK) and |message| this thread's last outcome, as a
 * failed Backplane call would, and returns |status|: for libraries built on
 * this API (libbackplane-model, bindings) that report through
 * bp_last_error. A status outside the codes above is recorded as INTERNAL;
 * BP_OK clears the state like bp_clear_error does for this thread. */
BP_API bp_status bp_report_error(bp_status status, const char *message);

/* The version of the libbackplane.so loaded at run time, as
 * BP_MAKE_VERSION(major, minor, patch) from backplane/version.h; compare it
 * with BP_VERSION, the version the caller was compiled against. */
BP_API uint32_t bp_version(void);
/* The same as text, e.g. "0.1.0". Static storage. */
BP_API const char *bp_version_string(void);

/* ------------------------------------------------------------------------ */
/* Logging. One sink for the core and every plugin (spdlog underneath); the
 * levels (bp_log_level) are in tensor.h.                                     */

/* |source| is "core" or a plugin name. Borrowed strings; valid during the call. */
typedef void (*bp_log_callback)(bp_log_level level, const char *source, const char *message, void *user_data);
/* Sets the minimum level (default from BP_LOG, else WARN). Thread-safe. */
BP_API void bp_log_set_level(bp_log_level level);
BP_API bp_log_level bp_log_get_level(void);
/* Routes messages to |callback| instead of stderr; NULL restores stderr.
 * |user_data| is borrowed until the callback is replaced. */
BP_API void bp_log_set_callback(bp_log_callback callback, void *user_data);

/* ------------------------------------------------------------------------ */
/* Quantization (types and their helpers: tensor.h).                         */

/* Quantizes |n_rows| rows of |n_per_row| floats from |src| into |dst| in the
 * GGUF block layout of |type| (byte-for-byte what llama.cpp writes); f32
 * copies and f16 converts. |n_per_row| must be a multiple of
 * bp_type_block_size(type). Both buffers are the caller's; |dst| must hold
 * bp_type_row_size(type, n_per_row) * n_rows bytes. Sets *out_bytes (may be
 * NULL) to the bytes written, 0 on failure. Thread-safe. */
BP_API bp_status bp_quantize_rows(bp_type type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                                  size_t *out_bytes);
/* The same, with the bytes llama.cpp's file quantizer writes (llama-quantize;
 * ggml_quantize_chunk without an importance matrix). Equal to
 * bp_quantize_rows for every type but IQ4_NL: bp_quantize_rows gives ggml's
 * reference quantizer (what ggml's CPY writes), which keeps a block's first
 * scale; the file quantizer tries 15 more scales per block, as IQ4_XS does,
 * and codes the block again against the best. bp-gguf quantize uses this. */
BP_API bp_status bp_quantize_rows_for_file(bp_type type, const float *src, void *dst, int64_t n_rows,
                                           int64_t n_per_row, size_t *out_bytes);
/* Expands |n| values (a multiple of the block size) of |type| at |src| into
 * floats at |dst|. Caller's buffers: |src| holds bp_type_row_size(type, n) bytes,
 * |dst| n floats. Thread-safe. */
BP_API bp_status bp_dequantize(bp_type type, const void *src, float *dst, int64_t n);

/* ------------------------------------------------------------------------ */
/* Contexts hold tensor metadata. Memory comes from buffers (bp_alloc_*).    */

typedef struct bp_context bp_context;

/* New empty context. |max_tensors| caps its tensors (0 = no cap). NULL on
 * out-of-memory. Caller owns; release with bp_context_free. */
BP_API bp_context *bp_context_new(size_t max_tensors);
/* Frees the context and its tensors (not the buffers they live in). NULL ok. */
BP_API void bp_context_free(bp_context *ctx);
BP_API size_t bp_context_tensor_count(const bp_context *ctx);
/* i-th tensor in creation order, NULL past the end. Borrowed; lives with ctx. */
BP_API bp_tensor *bp_context_tensor(const bp_context *ctx, size_t i);
/* First tensor named |name| in *out (borrowed; lives with ctx); NOT_FOUND
 * with *out = NULL when there is none. */
BP_API bp_status bp_context_find_tensor(const bp_context *ctx, const char *name, bp_tensor **out);

/* New tensor of |n_dims| (1..4) dims, contiguous strides, no memory yet.
 * Borrowed; lives with ctx. NULL with a message on bad input. */
BP_API bp_tensor *bp_tensor_new(bp_context *ctx, bp_type type, int n_dims, const int64_t *ne);
BP_API bp_tensor *bp_tensor_new_1d(bp_context *ctx, bp_type type, int64_t ne0);
BP_API bp_tensor *bp_tensor_new_2d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1);
BP_API bp_tensor *bp_tensor_new_3d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2);
BP_API bp_tensor *bp_tensor_new_4d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* Copies |name| (truncated to BP_MAX_NAME-1 bytes). Returns |t|. */
BP_API bp_tensor *bp_tensor_set_name(bp_tensor *t, const char *name);
/* ORs BP_TENSOR_FLAG_* into t->flags. Returns |t|. */
BP_API bp_tensor *bp_tensor_set_flags(bp_tensor *t, uint32_t flags);

/* Views alias their source's memory and live with |ctx| (borrowed). |nb| are byte strides, |offset| bytes
 * from the start of |a|; the view must lie inside |a|. */
BP_API bp_tensor *bp_view_1d(bp_context *ctx, bp_tensor *a, int64_t ne0, size_t offset);
BP_API bp_tensor *bp_view_2d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
BP_API bp_tensor *bp_view_3d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                             size_t nb2, size_t offset);
BP_API bp_tensor *bp_view_4d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                             size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Same elements, new shape; |a| must be contiguous and the counts equal. */
BP_API bp_tensor *bp_reshape(bp_context *ctx, bp_tensor *a, int n_dims, const int64_t *ne);
BP_API bp_tensor *bp_reshape_2d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1);
BP_API bp_tensor *bp_reshape_3d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
BP_API bp_tensor *bp_reshape_4d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* Dim i of |a| becomes dim axis_i of the result; the axes are a permutation of 0..3. */
BP_API bp_tensor *bp_permute(bp_context *ctx, bp_tensor *a, int axis0, int axis1, int axis2, int axis3);
/* Swaps dims 0 and 1. */
BP_API bp_tensor *bp_transpose(bp_context *ctx, bp_tensor *a);

/* ------------------------------------------------------------------------ */
/* Ops. Each returns a new tensor (an op node) or NULL with a message.
 * Borrowed, like every tensor: it lives with |ctx|. Shape rules live in the
 * core's op table; docs/ops.md states them.                                  */

BP_API bp_tensor *bp_add(bp_context *ctx, bp_tensor *a, bp_tensor *b);
BP_API bp_tensor *bp_sub(bp_context *ctx, bp_tensor *a, bp_tensor *b);
BP_API bp_tensor *bp_mul(bp_context *ctx, bp_tensor *a, bp_tensor *b);
BP_API bp_tensor *bp_div(bp_context *ctx, bp_tensor *a, bp_tensor *b);
BP_API bp_tensor *bp_scale(bp_context *ctx, bp_tensor *a, float s);
BP_API bp_tensor *bp_clamp(bp_context *ctx, bp_tensor *a, float min, float max);
/* Any op of the unary group (BP_OP_NEG .. BP_OP_SIGMOID). */
BP_API bp_tensor *bp_unary(bp_context *ctx, bp_tensor *a, bp_op op);
BP_API bp_tensor *bp_neg(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_abs(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_sqr(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_sqrt(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_exp(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_relu(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_gelu(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_silu(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_tanh(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_sigmoid(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_sum_rows(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_mean(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_argmax(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_norm(bp_context *ctx, bp_tensor *a, float eps);
BP_API bp_tensor *bp_rms_norm(bp_context *ctx, bp_tensor *a, float eps);
/* softmax(a * scale + mask) over dim 0; |mask| may be NULL. */
BP_API bp_tensor *bp_soft_max(bp_context *ctx, bp_tensor *a, bp_tensor *mask, float scale);
/* a [K, M, A2, A3] (f32/f16) x b [K, N, B2, B3] (f32) -> [M, N, B2, B3] f32;
 * B2 % A2 == 0 and B3 % A3 == 0 (a broadcasts over the batch dims). */
BP_API bp_tensor *bp_mul_mat(bp_context *ctx, bp_tensor *a, bp_tensor *b);
/* Rows of a [E, R, A2, A3] picked by i32 ids [N, A2, A3] -> [E, N, A2, A3] f32. */
BP_API bp_tensor *bp_get_rows(bp_context *ctx, bp_tensor *a, bp_tensor *ids);
/* Copies |a| into |b| (same element count, any layout, f32<->f16). */
BP_API bp_tensor *bp_cpy(bp_context *ctx, bp_tensor *a, bp_tensor *b);
/* Contiguous copy of |a|, of |type| (bp_cont keeps a's type). */
BP_API bp_tensor *bp_cont(bp_context *ctx, bp_tensor *a);
BP_API bp_tensor *bp_cast(bp_context *ctx, bp_tensor *a, bp_type type);
BP_API bp_tensor *bp_concat(bp_context *ctx, bp_tensor *a, bp_tensor *b, int dim);
/* Rotary embedding of a [D, H, T, B] by i32 positions [T]; |n_dims| <= D, even. */
BP_API bp_tensor *bp_rope(bp_context *ctx, bp_tensor *a, bp_tensor *pos, int n_dims, int mode, float freq_base,
                          float freq_scale);
/* bp_rope with f32 frequency factors [>= n_dims/2] (NULL: none): pair i's angle is divided
 * by freq_factors[i] (LLaMA 3.1's rope_freqs.weight). */
BP_API bp_tensor *bp_rope_ext(bp_context *ctx, bp_tensor *a, bp_tensor *pos, bp_tensor *freq_factors, int n_dims,
                              int mode, float freq_base, float freq_scale);
/* Fused attention, softmax(scale q k^T + mask) v per query row, without the
 * scores matrix in memory: q f32 [D, T, H, B]; k [D, N, Hk, B] and v
 * [Dv, N, Hk, B] both f32 or both f16, dense rows, Hk dividing H (query head
 * h reads key/value head h / (H / Hk)); mask NULL or f32 [N, >= T, ...] whose
 * dims 2 and 3 divide H and B. Result f32 [Dv, H, T, B]: heads of one token
 * together, so merging heads is a reshape. A fully masked row gives zeros. */
BP_API bp_tensor *bp_attention(bp_context *ctx, bp_tensor *q, bp_tensor *k, bp_tensor *v, bp_tensor *mask,
                               float scale);
/* Writes row i of |src| (f32 [n0, n, n2, n3]) into row ids[i] of |dst| (f32 or
 * f16 [n0, R, n2, n3], converted) for each i < n; |ids| i32 [n], each in
 * [0, R), checked when the graph runs. Like bp_cpy, the result is a view of
 * |dst|: use it in later ops that must see the rows. Because the rows are
 * data, one graph serves every position (a KV cache write). */
BP_API bp_tensor *bp_set_rows(bp_context *ctx, bp_tensor *dst, bp_tensor *src, bp_tensor *ids);

/* Any computed op by number, for programs that rebuild a graph from a
 * description: |src| holds |n_src| sources (as many as the op takes; an
 * optional one, such as SOFT_MAX's mask, may be NULL or left out), |params|
 * the first |n_params| op_params words (the rest are 0; no more than the op
 * reads, see bp_op). The op's shape, type and parameter rules are those of
 * its typed builder (bp_op_new(ctx, BP_OP_ADD, (bp_tensor *[]){a, b}, 2,
 * NULL, 0) is bp_add(ctx, a, b)); BP_OP_CONT keeps a's type (bp_cast
 * converts). Leaves and views have their own builders and are refused. NULL
 * with INVALID_ARGUMENT naming the op on an unknown op, a wrong source or
 * parameter count, or a rule the sources break. Borrowed; lives with ctx. */
BP_API bp_tensor *bp_op_new(bp_context *ctx, bp_op op, bp_tensor *const *src, int n_src, const int32_t *params,
                            int n_params);

/* Op name ("ADD"), or "?". Static storage: valid for the process's life. */
BP_API const char *bp_op_name(bp_op op);
/* Estimated floating point operations and bytes moved by node |t|. */
BP_API uint64_t bp_op_flops(const bp_tensor *t);
BP_API uint64_t bp_op_bytes(const bp_tensor *t);

/* ------------------------------------------------------------------------ */
/* Graphs: the nodes needed to compute chosen outputs, in topological order. */

typedef struct bp_graph bp_graph;

/* New empty graph holding up to |max_nodes| nodes and leafs each (0 = 4096).
 * Caller owns; release with bp_graph_free. |ctx| is not retained. */
BP_API bp_graph *bp_graph_new(bp_context *ctx, size_t max_nodes);
BP_API void bp_graph_free(bp_graph *graph);
/* Adds |t| and everything it depends on (depth-first, sources in order).
 * Marks |t| as an output. RESOURCE_EXHAUSTED past max_nodes. */
BP_API bp_status bp_graph_build(bp_graph *graph, bp_tensor *t);
/* Removes every node and leaf. */
BP_API void bp_graph_clear(bp_graph *graph);
BP_API size_t bp_graph_node_count(const bp_graph *graph);
/* i-th node / leaf in topological order, NULL past the end. Borrowed: the
 * tensor lives with its context (not with the graph). */
BP_API bp_tensor *bp_graph_node(const bp_graph *graph, size_t i);
BP_API size_t bp_graph_leaf_count(const bp_graph *graph);
BP_API bp_tensor *bp_graph_leaf(const bp_graph *graph, size_t i);
/* Checks every node's shapes and types against the op table again (a caller
 * may have edited tensors). INVALID_ARGUMENT naming the node otherwise. */
BP_API bp_status bp_graph_validate(const bp_graph *graph);

/* ------------------------------------------------------------------------ */
/* Plugins and devices (the registry). Discovery happens on first use:
 * BP_PLUGIN_PATH (':'-separated; ignored under setuid), paths added here,
 * <libdir>/backplane/plugins, then the build tree. Only libbp-*.so files.  */

typedef struct bp_plugin bp_plugin;
typedef struct bp_device bp_device;

/* Adds a folder to search (before the install folder). Copied. Discovery
 * re-runs on next use; already-loaded plugins stay. Thread-safe. */
BP_API bp_status bp_registry_add_path(const char *folder);
/* Loads one plugin file explicitly (any file name). |out_plugin| may be NULL;
 * the plugin is borrowed (the registry owns it until bp_plugin_unload).
 * Loading the same file again returns the same plugin. ALREADY_EXISTS when
 * another file already gave a plugin that name. Thread-safe. */
BP_API bp_status bp_registry_load(const char *path, bp_plugin **out_plugin);
/* Loads every plugin file found now (else each when first needed: api-guide). */
BP_API bp_status bp_registry_discover(void);

BP_API size_t bp_plugin_count(void);
/* Borrowed; valid until bp_plugin_unload or bp_runtime_shutdown. */
BP_API bp_plugin *bp_plugin_get(size_t i);
/* The plugin called |name| in *out (loading its file first when it is not
 * loaded yet; borrowed, as bp_plugin_get). NOT_FOUND naming it when no such
 * plugin is installed; a load failure returns its own status. */
BP_API bp_status bp_registry_find_plugin(const char *name, bp_plugin **out);
/* The plugin's strings. Borrowed; valid while the plugin is loaded. */
BP_API const char *bp_plugin_name(const bp_plugin *p);
BP_API const char *bp_plugin_version(const bp_plugin *p);
BP_API const char *bp_plugin_path(const bp_plugin *p);
BP_API const char *bp_plugin_description(const bp_plugin *p);
BP_API size_t bp_plugin_param_count(const bp_plugin *p);
/* Borrowed; valid while the plugin is loaded. */
BP_API const bp_param_info *bp_plugin_param(const bp_plugin *p, size_t i);
/* Devices of |p|. The first call (or any listing or spec naming the plugin)
 * enumerates them: a plugin with deferred discovery (Vulkan, OpenCL) creates
 * its driver instance then, not at load. */
BP_API size_t bp_plugin_device_count(const bp_plugin *p);
/* OK, or why |p| has no usable devices (e.g. UNAVAILABLE: no driver); the
 * message is borrowed, valid until the plugin is unloaded. Enumerates the
 * devices first if that has not happened yet. */
BP_API bp_status bp_plugin_status(const bp_plugin *p, const char **out_message);
/* i-th device of |p|, NULL past the end. Borrowed; valid while the plugin
 * is loaded. */
BP_API bp_device *bp_plugin_device(const bp_plugin *p, size_t i);
/* Unloads |p| (shutdown, then dlclose). FAILED_PRECONDITION while any of its
 * backends, buffers or events live. Honours BP_DISABLE_UNLOAD=1 (no dlclose). */
BP_API bp_status bp_plugin_unload(bp_plugin *p);

/* Candidates that were refused, with the reason. Borrowed strings; valid until
 * the next discovery. */
BP_API size_t bp_rejected_count(void);
BP_API bp_status bp_rejected_get(size_t i, const char **out_path, bp_status *out_status, const char **out_message);

/* Every device of every loaded plugin, in plugin then device order. */
BP_API size_t bp_device_count(void);
/* Borrowed; valid while its plugin is loaded. */
BP_API bp_device *bp_device_get(size_t i);

typedef struct bp_device_info {
  uint32_t struct_size; /* caller sets sizeof(bp_device_info) */
  const char *name;
  const char *description;
  const char *id;   /* stable across restarts: UUID, PCI bus id or plugin-made */
  const char *spec; /* the exact spec string that selects this device */
  bp_device_type type;
  uint64_t memory_total, memory_free; /* bytes; 0 when unknown */
  uint32_t caps;                      /* BP_DEVICE_CAP_* */
  uint32_t index;                     /* within its plugin */
  bp_plugin *plugin;
} bp_device_info;
/* Fills |out| (strings borrowed; valid while the plugin is loaded). */
BP_API bp_status bp_device_describe(const bp_device *dev, bp_device_info *out);
/* "cpu", "gpu", ...: static storage. */
BP_API const char *bp_device_type_name(bp_device_type type);

/* Unloads every plugin and ends the registry: registry calls after it return
 * FAILED_PRECONDITION. All or nothing: while any backend, buffer or event of
 * a plugin lives it returns FAILED_PRECONDITION naming them and changes
 * nothing (free them and call it again). */
BP_API bp_status bp_runtime_shutdown(void);

/* ------------------------------------------------------------------------ */
/* Buffer types and buffers.                                                  */

typedef struct bp_buffer_type bp_buffer_type;
typedef struct bp_buffer bp_buffer;

/* Borrowed; valid while the buffer type's plugin is loaded. */
BP_API const char *bp_buffer_type_name(const bp_buffer_type *buft);
/* Allocates |size| bytes (0 allowed). Caller owns; release with bp_buffer_free. */
BP_API bp_status bp_buffer_type_alloc(bp_buffer_type *buft, size_t size, bp_buffer **out_buffer);
BP_API size_t bp_buffer_type_alignment(const bp_buffer_type *buft);
BP_API size_t bp_buffer_type_max_size(const bp_buffer_type *buft);
/* Bytes |t| needs in a buffer of this type (>= bp_tensor_nbytes). */
BP_API size_t bp_buffer_type_alloc_size(const bp_buffer_type *buft, const bp_tensor *t);
BP_API bool bp_buffer_type_is_host(const bp_buffer_type *buft);
/* The device the buffer type belongs to. Borrowed; valid while its plugin is
 * loaded. */
BP_API bp_device *bp_buffer_type_device(const bp_buffer_type *buft);
/* The device's default buffer type. Borrowed; valid while the plugin is loaded. */
BP_API bp_buffer_type *bp_device_buffer_type(bp_device *dev);
/* Pinned host buffer type of the device, or NULL. Borrowed; valid while the
 * plugin is loaded. */
BP_API bp_buffer_type *bp_device_host_buffer_type(bp_device *dev);
/* The device's buffer type for constant weights (matrices that MUL_MAT
 * reads), stored in a layout its kernels read fastest, or NULL
 * (UNIMPLEMENTED) when the device has none. bp_tensor_get/set see the plain
 * bytes. Borrowed; valid while the plugin is loaded. */
BP_API bp_buffer_type *bp_device_weight_buffer_type(bp_device *dev);
/* Wraps caller memory; |ptr| must outlive the buffer. Caller owns the buffer. */
BP_API bp_status bp_device_buffer_from_host_ptr(bp_device *dev, void *ptr, size_t size, bp_buffer **out_buffer);

BP_API void bp_buffer_free(bp_buffer *buf); /* NULL ok; never fails */
BP_API size_t bp_buffer_size(const bp_buffer *buf);
/* Base address (opaque for device buffers). Valid until the buffer is freed. */
BP_API void *bp_buffer_base(const bp_buffer *buf);
/* The buffer's type. Borrowed; valid while its plugin is loaded. */
BP_API bp_buffer_type *bp_buffer_buffer_type(const bp_buffer *buf);
BP_API bool bp_buffer_is_host(const bp_buffer *buf);
/* Fills the whole buffer with |value|. */
BP_API bp_status bp_buffer_clear(bp_buffer *buf, uint8_t value);
BP_API void bp_buffer_set_usage(bp_buffer *buf, bp_buffer_usage usage);
BP_API bp_buffer_usage bp_buffer_get_usage(const bp_buffer *buf);
/* Places |t| at byte |offset| of |buf| (offset must be aligned, the tensor
 * must fit). Views take their memory from view_src instead. */
BP_API bp_status bp_buffer_place_tensor(bp_buffer *buf, bp_tensor *t, size_t offset);

/* Copies bytes into / out of |t| (which must have memory); |offset| and
 * |size| in bytes from the tensor's data, inside bp_tensor_nbytes. Sync. */
BP_API bp_status bp_tensor_set(bp_tensor *t, const void *data, size_t offset, size_t size);
BP_API bp_status bp_tensor_get(const bp_tensor *t, void *data, size_t offset, size_t size);
BP_API bp_status bp_tensor_memset(bp_tensor *t, uint8_t value, size_t offset, size_t size);
/* Copies |src| to |dst| (same bytes count and type), across buffers or devices. */
BP_API bp_status bp_tensor_copy(const bp_tensor *src, bp_tensor *dst);

/* ------------------------------------------------------------------------ */
/* Backends: an instance of a device that computes graphs.                    */

typedef struct bp_backend bp_backend;
typedef struct bp_event bp_event;

/* Creates a backend from one spec (see docs/device-spec.md): "cpu",
 * "cpu:threads=2", "vulkan:1", "auto", "x:id=...". For lists ("a;b") use
 * bp_backend_new_list. Caller owns; release with bp_backend_free. */
BP_API bp_status bp_backend_new(const char *spec, bp_backend **out_backend);
/* Creates one backend per spec of a ';' list, in order. Fails whole (nothing
 * left allocated) if any spec fails. |out| gets up to |capacity| backends;
 * RESOURCE_EXHAUSTED if the list is longer. Caller owns each; release each
 * with bp_backend_free. */
BP_API bp_status bp_backend_new_list(const char *list, bp_backend **out, size_t capacity, size_t *out_count);
/* Backend on |dev| with |params| "key=value,..." (may be NULL or ""). Caller
 * owns; release with bp_backend_free. */
BP_API bp_status bp_backend_new_on_device(bp_device *dev, const char *params, bp_backend **out_backend);
BP_API void bp_backend_free(bp_backend *backend); /* NULL ok */
/* "cpu:0" style; borrowed, lives with the backend. */
BP_API const char *bp_backend_name(const bp_backend *backend);
/* The backend's device and default buffer type. Borrowed; valid while its
 * plugin is loaded. */
BP_API bp_device *bp_backend_device(const bp_backend *backend);
BP_API bp_buffer_type *bp_backend_buffer_type(bp_backend *backend);
/* Allocates a buffer of the backend's default type. Caller owns; release with
 * bp_buffer_free. */
BP_API bp_status bp_backend_alloc_buffer(bp_backend *backend, size_t size, bp_buffer **out_buffer);
BP_API size_t bp_backend_alignment(bp_backend *backend);
/* Runs |graph| to completion. Validates it first; UNIMPLEMENTED names the
 * first node the backend cannot run. */
BP_API bp_status bp_backend_graph_compute(bp_backend *backend, const bp_graph *graph);
/* Starts |graph|; bp_backend_synchronize waits. Sync backends finish inside. */
BP_API bp_status bp_backend_graph_compute_async(bp_backend *backend, const bp_graph *graph);
BP_API bp_status bp_backend_synchronize(bp_backend *backend);

/* Graph plans: |graph| prepared once for repeated runs (the vulkan plugin
 * records it into a command buffer and replays it). The graph's tensors must
 * keep their memory and shapes while the plan lives; their contents may
 * change between runs. UNIMPLEMENTED when the backend has no plans: run the
 * graph with bp_backend_graph_compute instead. Validated like a compute.
 * Caller owns; release with bp_graph_plan_free before freeing the backend. */
typedef struct bp_graph_plan bp_graph_plan;
BP_API bp_status bp_graph_plan_new(bp_backend *backend, const bp_graph *graph, bp_graph_plan **out_plan);
/* Starts one run of |plan| on its backend; bp_backend_synchronize waits. */
BP_API bp_status bp_graph_plan_compute_async(bp_graph_plan *plan);
/* Waits for the plan's backend, then releases the plan. NULL is a no-op. */
BP_API void bp_graph_plan_free(bp_graph_plan *plan);
BP_API bool bp_backend_supports_op(bp_backend *backend, const bp_tensor *op);
BP_API bool bp_backend_supports_buft(bp_backend *backend, const bp_buffer_type *buft);
BP_API bool bp_backend_offload_op(bp_backend *backend, const bp_tensor *op);
/* Async transfers on the backend's queue (sync fallback). |data| must stay
 * valid until bp_backend_synchronize. */
BP_API bp_status bp_backend_tensor_set_async(bp_backend *backend, bp_tensor *t, const void *data, size_t offset,
                                             size_t size);
BP_API bp_status bp_backend_tensor_get_async(bp_backend *backend, const bp_tensor *t, void *data, size_t offset,
                                             size_t size);

/* Events order work between backends. Caller owns; release with bp_event_free. */
BP_API bp_status bp_event_new(bp_device *dev, bp_event **out_event);
BP_API void bp_event_free(bp_event *event);
BP_API bp_status bp_event_record(bp_event *event, bp_backend *backend);
/* Makes |backend|'s later work wait for |event|. */
BP_API bp_status bp_backend_wait_event(bp_backend *backend, bp_event *event);
BP_API bp_status bp_event_synchronize(bp_event *event);

/* ------------------------------------------------------------------------ */
/* Allocation.                                                                */

/* Linear allocator inside one buffer: tensors placed one after another at
 * the buffer type's alignment. A plain value; no release. */
typedef struct bp_tallocr {
  bp_buffer *buffer;
  size_t offset;
  size_t alignment;
} bp_tallocr;
BP_API bp_tallocr bp_tallocr_new(bp_buffer *buffer);
/* OUT_OF_DEVICE_MEMORY (naming sizes) when |t| does not fit. */
BP_API bp_status bp_tallocr_alloc(bp_tallocr *talloc, bp_tensor *t);

/* Allocates every tensor of |ctx| that has no memory (views excepted) into one
 * new buffer of |buft| / of the backend's type. Caller owns *out_buffer. A
 * context with nothing to allocate gives BP_OK and *out_buffer == NULL. */
BP_API bp_status bp_context_alloc_tensors_from_buft(bp_context *ctx, bp_buffer_type *buft, bp_buffer **out_buffer);
BP_API bp_status bp_context_alloc_tensors(bp_context *ctx, bp_backend *backend, bp_buffer **out_buffer);

/* Graph allocator: places intermediate tensors by liveness, reusing memory
 * in place where the op table allows. Leafs without memory are allocated
 * too; tensors that already have memory are left alone. */
typedef struct bp_gallocr bp_gallocr;
/* Caller owns; release with bp_gallocr_free. |buft| is borrowed: its plugin
 * must stay loaded while the allocator lives. */
BP_API bp_gallocr *bp_gallocr_new(bp_buffer_type *buft);
BP_API void bp_gallocr_free(bp_gallocr *galloc);
/* Plans |graph| (a worst case) and allocates a buffer large enough. */
BP_API bp_status bp_gallocr_reserve(bp_gallocr *galloc, const bp_graph *graph);
/* Plans and places every tensor of |graph| (reallocating if the reserve was too small). */
BP_API bp_status bp_gallocr_alloc_graph(bp_gallocr *galloc, const bp_graph *graph);
BP_API size_t bp_gallocr_buffer_size(const bp_gallocr *galloc);

/* ------------------------------------------------------------------------ */
/* Scheduler: one graph over several backends in priority order.             */

typedef struct bp_sched bp_sched;

/* Called before (ask=true: return true to observe |t|) and after computing
 * each observed node (ask=false: return false to stop the graph). */
typedef bool (*bp_sched_eval_callback)(bp_tensor *t, bool ask, void *user_data);

/* |backends| in priority order, the last one a CPU backend; |bufts| may be
 * NULL (default types). |graph_size| bounds nodes per graph. With |parallel|
 * every copied input gets BP_SCHED_MAX_COPIES versions (triple buffering) so
 * consecutive runs overlap. Borrows
 * the backends (they must outlive the scheduler). Caller owns; bp_sched_free. */
BP_API bp_sched *bp_sched_new(bp_backend **backends, bp_buffer_type **bufts, size_t n_backends, size_t graph_size,
                              bool parallel);
BP_API void bp_sched_free(bp_sched *sched);
/* Sizes compute buffers from a worst-case graph. */
BP_API bp_status bp_sched_reserve(bp_sched *sched, bp_graph *measure_graph);
BP_API size_t bp_sched_backend_count(const bp_sched *sched);
/* i-th backend in priority order; borrowed (the caller owns the backends). */
BP_API bp_backend *bp_sched_backend(const bp_sched *sched, size_t i);
/* Splits of the last allocated graph; copies of inputs across backends. */
BP_API size_t bp_sched_split_count(const bp_sched *sched);
BP_API size_t bp_sched_copy_count(const bp_sched *sched);
BP_API size_t bp_sched_buffer_size(const bp_sched *sched, bp_backend *backend);
/* Pins |node| to |backend| for the next alloc/compute. */
BP_API bp_status bp_sched_set_tensor_backend(bp_sched *sched, bp_tensor *node, bp_backend *backend);
/* The backend |node| was assigned to, or NULL. Borrowed (one of the
 * scheduler's backends, which the caller owns). */
BP_API bp_backend *bp_sched_get_tensor_backend(const bp_sched *sched, const bp_tensor *node);
/* Assigns, splits and allocates |graph|. */
BP_API bp_status bp_sched_alloc_graph(bp_sched *sched, bp_graph *graph);
BP_API bp_status bp_sched_graph_compute(bp_sched *sched, bp_graph *graph);
BP_API bp_status bp_sched_graph_compute_async(bp_sched *sched, bp_graph *graph);
BP_API bp_status bp_sched_synchronize(bp_sched *sched);
/* Forgets assignments and allocations (not the reserved buffers). */
BP_API void bp_sched_reset(bp_sched *sched);
BP_API void bp_sched_set_eval_callback(bp_sched *sched, bp_sched_eval_callback callback, void *user_data);
/* Whether splits run through graph plans on backends that have them (default
 * on): a split's plan is made at its first run after an allocation and
 * replayed while the allocation stays (bp_sched_alloc_graph, a changed graph
 * or bp_sched_reset drop it). Runs with an eval callback never use plans. */
BP_API bp_status bp_sched_set_graph_plans(bp_sched *sched, bool enable);

/* One split of the last allocated graph, for plans and tools. */
typedef struct bp_sched_split_info {
  uint32_t struct_size; /* caller sets */
  bp_backend *backend;
  size_t first_node, n_nodes; /* range in the scheduled graph */
  size_t n_inputs;            /* tensors copied in from other backends */
  uint64_t bytes_copied;      /* per run */
  size_t n_plans;             /* graph plans held (one per pipeline slot run so far) */
} bp_sched_split_info;
/* Fills |out| with split |i| (0 <= i < bp_sched_split_count). */
BP_API bp_status bp_sched_split_describe(const bp_sched *sched, size_t i, bp_sched_split_info *out);

/* Pipeline slots per copied input with parallel=true: run k+1 fills its
 * copies while run k computes and run k-1's results are still read. */
#define BP_SCHED_MAX_COPIES 3

#ifdef __cplusplus
}
#endif

/* The 0.1 names (deprecated aliases), unless BP_NO_DEPRECATED. */
#include "backplane/deprecated.h"

#endif /* BACKPLANE_BACKPLANE_H_ */
