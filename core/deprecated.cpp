// deprecated.cpp: the 0.1 names of the core's public functions, each
// forwarding to its 0.2 name (backplane.h's deprecated section; the
// registry's are in registry/deprecated.cpp). Kept one minor version so that
// applications built against 0.1 still load; removed in 0.3.
//
// A forwarder that takes a bp_type never passes it on by value: that would
// load whatever int a C caller sent as the enum, which is undefined for a
// value outside it (UBSan: "not a valid value for type 'bp_type'"). It hands
// it by reference to the 0.2 function's body, which reads it as an int and
// refuses a bad one with the 0.2 function's status and message.
#define BP_DEPRECATED(use)
#include "backplane/backplane.h"
#include "core/quant/quant.hpp"
#include "core/tensor_util.hpp"

extern "C" {

bp_tensor *bp_new_tensor(bp_context *ctx, bp_type type, int n_dims, const int64_t *ne) {
  BP_API_SCOPE();
  return bp::core::new_tensor(ctx, type, n_dims, ne);
}
bp_tensor *bp_new_tensor_1d(bp_context *ctx, bp_type type, int64_t ne0) {
  BP_API_SCOPE();
  const int64_t ne[1] = {ne0};
  return bp::core::new_tensor(ctx, type, 1, ne);
}
bp_tensor *bp_new_tensor_2d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1) {
  BP_API_SCOPE();
  const int64_t ne[2] = {ne0, ne1};
  return bp::core::new_tensor(ctx, type, 2, ne);
}
bp_tensor *bp_new_tensor_3d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
  BP_API_SCOPE();
  const int64_t ne[3] = {ne0, ne1, ne2};
  return bp::core::new_tensor(ctx, type, 3, ne);
}
bp_tensor *bp_new_tensor_4d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  BP_API_SCOPE();
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  return bp::core::new_tensor(ctx, type, 4, ne);
}
bp_tensor *bp_set_name(bp_tensor *t, const char *name) { return bp_tensor_set_name(t, name); }
bp_tensor *bp_set_flags(bp_tensor *t, uint32_t flags) { return bp_tensor_set_flags(t, flags); }
bp_status bp_backend_graph_plan_create(bp_backend *backend, const bp_graph *graph, bp_graph_plan **out_plan) {
  return bp_graph_plan_new(backend, graph, out_plan);
}
bp_status bp_alloc_ctx_tensors_from_buft(bp_context *ctx, bp_buffer_type *buft, bp_buffer **out_buffer) {
  return bp_context_alloc_tensors_from_buft(ctx, buft, out_buffer);
}
bp_status bp_alloc_ctx_tensors(bp_context *ctx, bp_backend *backend, bp_buffer **out_buffer) {
  return bp_context_alloc_tensors(ctx, backend, out_buffer);
}
bp_status bp_event_wait(bp_backend *backend, bp_event *event) { return bp_backend_wait_event(backend, event); }
size_t bp_context_n_tensors(const bp_context *ctx) { return bp_context_tensor_count(ctx); }
size_t bp_graph_n_nodes(const bp_graph *graph) { return bp_graph_node_count(graph); }
size_t bp_graph_n_leafs(const bp_graph *graph) { return bp_graph_leaf_count(graph); }
int bp_sched_get_n_backends(const bp_sched *sched) { return (int)bp_sched_backend_count(sched); }
bp_backend *bp_sched_get_backend(const bp_sched *sched, int i) {
  return bp_sched_backend(sched, i < 0 ? SIZE_MAX : (size_t)i);
}
int bp_sched_get_n_splits(const bp_sched *sched) { return (int)bp_sched_split_count(sched); }
int bp_sched_get_n_copies(const bp_sched *sched) { return (int)bp_sched_copy_count(sched); }
bp_status bp_sched_get_split(const bp_sched *sched, int i, bp_sched_split_info *out) {
  return bp_sched_split_describe(sched, i < 0 ? SIZE_MAX : (size_t)i, out);
}

size_t bp_quantize(bp_type type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row) {
  BP_API_SCOPE();
  size_t bytes = 0;
  bp::core::quant::quantize_rows(type, src, dst, n_rows, n_per_row, &bytes, "bp_quantize_rows");
  return bytes;
}
bp_status bp_sched_split(const bp_sched *sched, size_t i, bp_sched_split_info *out) {
  return bp_sched_split_describe(sched, i, out);
}
bp_buffer_type *bp_buffer_get_type(const bp_buffer *buf) { return bp_buffer_buffer_type(buf); }
bp_device *bp_backend_get_device(const bp_backend *backend) { return bp_backend_device(backend); }
size_t bp_gallocr_get_buffer_size(const bp_gallocr *galloc) { return bp_gallocr_buffer_size(galloc); }
size_t bp_sched_get_buffer_size(const bp_sched *sched, bp_backend *backend) {
  return bp_sched_buffer_size(sched, backend);
}
bp_tensor *bp_context_find(const bp_context *ctx, const char *name) {
  bp_tensor *t = nullptr;
  bp_context_find_tensor(ctx, name, &t);
  return t;
}

}  // extern "C"
