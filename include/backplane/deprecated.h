/* deprecated.h: the names of Backplane 0.1, and those renamed before 0.3,
 * kept as deprecated aliases and removed in 0.3 (docs/api-guide.md lists them). Each
 * forwards to the function named in its message. backplane.h includes this
 * header at its end, so existing code keeps compiling (with a warning per
 * use); define BP_NO_DEPRECATED to hide them. New code never includes it.
 */
#ifndef BACKPLANE_DEPRECATED_H_
#define BACKPLANE_DEPRECATED_H_

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef BP_NO_DEPRECATED
#ifndef BP_DEPRECATED
#if defined(__GNUC__) || defined(__clang__)
#define BP_DEPRECATED(use) __attribute__((deprecated("use " use)))
#else
#define BP_DEPRECATED(use)
#endif
#endif
BP_DEPRECATED("bp_tensor_new")
BP_API bp_tensor *bp_new_tensor(bp_context *ctx, bp_type type, int n_dims, const int64_t *ne);
BP_DEPRECATED("bp_tensor_new_1d") BP_API bp_tensor *bp_new_tensor_1d(bp_context *ctx, bp_type type, int64_t ne0);
BP_DEPRECATED("bp_tensor_new_2d")
BP_API bp_tensor *bp_new_tensor_2d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1);
BP_DEPRECATED("bp_tensor_new_3d")
BP_API bp_tensor *bp_new_tensor_3d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2);
BP_DEPRECATED("bp_tensor_new_4d")
BP_API bp_tensor *bp_new_tensor_4d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
BP_DEPRECATED("bp_tensor_set_name") BP_API bp_tensor *bp_set_name(bp_tensor *t, const char *name);
BP_DEPRECATED("bp_tensor_set_flags") BP_API bp_tensor *bp_set_flags(bp_tensor *t, uint32_t flags);
BP_DEPRECATED("bp_backend_new") BP_API bp_status bp_backend_init(const char *spec, bp_backend **out_backend);
BP_DEPRECATED("bp_backend_new_list")
BP_API bp_status bp_backends_init(const char *list, bp_backend **out, size_t capacity, size_t *out_count);
BP_DEPRECATED("bp_backend_new_on_device")
BP_API bp_status bp_device_init_backend(bp_device *dev, const char *params, bp_backend **out_backend);
BP_DEPRECATED("bp_graph_plan_new")
BP_API bp_status bp_backend_graph_plan_create(bp_backend *backend, const bp_graph *graph, bp_graph_plan **out_plan);
BP_DEPRECATED("bp_context_alloc_tensors_from_buft")
BP_API bp_status bp_alloc_ctx_tensors_from_buft(bp_context *ctx, bp_buffer_type *buft, bp_buffer **out_buffer);
BP_DEPRECATED("bp_context_alloc_tensors")
BP_API bp_status bp_alloc_ctx_tensors(bp_context *ctx, bp_backend *backend, bp_buffer **out_buffer);
BP_DEPRECATED("bp_backend_wait_event") BP_API bp_status bp_event_wait(bp_backend *backend, bp_event *event);
BP_DEPRECATED("bp_context_tensor_count") BP_API size_t bp_context_n_tensors(const bp_context *ctx);
BP_DEPRECATED("bp_graph_node_count") BP_API size_t bp_graph_n_nodes(const bp_graph *graph);
BP_DEPRECATED("bp_graph_leaf_count") BP_API size_t bp_graph_n_leafs(const bp_graph *graph);
BP_DEPRECATED("bp_plugin_param_count") BP_API size_t bp_plugin_n_params(const bp_plugin *p);
BP_DEPRECATED("bp_sched_backend_count") BP_API int bp_sched_get_n_backends(const bp_sched *sched);
BP_DEPRECATED("bp_sched_backend") BP_API bp_backend *bp_sched_get_backend(const bp_sched *sched, int i);
BP_DEPRECATED("bp_sched_split_count") BP_API int bp_sched_get_n_splits(const bp_sched *sched);
BP_DEPRECATED("bp_sched_copy_count") BP_API int bp_sched_get_n_copies(const bp_sched *sched);
BP_DEPRECATED("bp_sched_split_describe")
BP_API bp_status bp_sched_get_split(const bp_sched *sched, int i, bp_sched_split_info *out);

/* Renamed before 0.3 to follow the naming rules (docs/api-guide.md). */
BP_DEPRECATED("bp_quantize_rows, which returns a status")
BP_API size_t bp_quantize(bp_type type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row);
BP_DEPRECATED("bp_device_describe") BP_API bp_status bp_device_get_info(const bp_device *dev, bp_device_info *out);
BP_DEPRECATED("bp_sched_split_describe")
BP_API bp_status bp_sched_split(const bp_sched *sched, size_t i, bp_sched_split_info *out);
BP_DEPRECATED("bp_buffer_buffer_type") BP_API bp_buffer_type *bp_buffer_get_type(const bp_buffer *buf);
BP_DEPRECATED("bp_backend_device") BP_API bp_device *bp_backend_get_device(const bp_backend *backend);
BP_DEPRECATED("bp_gallocr_buffer_size") BP_API size_t bp_gallocr_get_buffer_size(const bp_gallocr *galloc);
BP_DEPRECATED("bp_sched_buffer_size")
BP_API size_t bp_sched_get_buffer_size(const bp_sched *sched, bp_backend *backend);
BP_DEPRECATED("bp_context_find_tensor, which returns a status")
BP_API bp_tensor *bp_context_find(const bp_context *ctx, const char *name);
BP_DEPRECATED("bp_registry_find_plugin, which returns a status")
BP_API bp_plugin *bp_plugin_find(const char *name);
#endif /* BP_NO_DEPRECATED */

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_DEPRECATED_H_ */
