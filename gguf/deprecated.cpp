// deprecated.cpp: the gguf names renamed before 0.3, each forwarding to its
// new name (gguf.h's deprecated section). Kept so that applications built
// against the old names still load; removed in 0.3.
#define BP_DEPRECATED(use)
#include "backplane/gguf.h"

extern "C" {

bp_status bp_gguf_kv_info(const bp_gguf *file, size_t i, bp_gguf_value_info *out) {
  return bp_gguf_kv_describe(file, i, out);
}
bp_status bp_gguf_kv_get_int(const bp_gguf *file, size_t i, uint64_t elem, int64_t *out) {
  return bp_gguf_kv_read_int(file, i, elem, out);
}
bp_status bp_gguf_kv_get_uint(const bp_gguf *file, size_t i, uint64_t elem, uint64_t *out) {
  return bp_gguf_kv_read_uint(file, i, elem, out);
}
bp_status bp_gguf_kv_get_float(const bp_gguf *file, size_t i, uint64_t elem, double *out) {
  return bp_gguf_kv_read_float(file, i, elem, out);
}
bp_status bp_gguf_kv_get_string(const bp_gguf *file, size_t i, uint64_t elem, const char **out_data,
                                uint64_t *out_len) {
  return bp_gguf_kv_read_string(file, i, elem, out_data, out_len);
}
bp_status bp_gguf_tensor_get_info(const bp_gguf *file, size_t i, bp_gguf_tensor_info *out) {
  return bp_gguf_tensor_describe(file, i, out);
}

}  // extern "C"
