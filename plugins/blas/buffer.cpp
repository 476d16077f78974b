// buffer.cpp: the BLAS plugin's host buffer type ("BLAS_Host") and buffers.
//
// Plain aligned host memory: tensors hold real host pointers, so any host
// backend (cpu) can read and write them in place, and this backend accepts
// any other plugin's host buffers the same way (supports_buft).
#include <cstdlib>
#include <cstring>
#include <new>

#include "blas.hpp"

namespace bp::blas {
namespace {

constexpr size_t kAlignment = 64;  // cache line; what sgemm likes best

struct host_buffer {
  void *data = nullptr;
  size_t size = 0;
  bool owned = true;  // false for wrapped caller memory
};

host_buffer *as_buffer(void *buf) { return static_cast<host_buffer *>(buf); }
char *tensor_bytes(const bp_tensor *t) { return static_cast<char *>(t->data); }

void buf_free(void *buf) noexcept {
  host_buffer *b = as_buffer(buf);
  if (!b) return;
  if (b->owned) std::free(b->data);
  delete b;
}

void *buf_base(void *buf) noexcept { return as_buffer(buf)->data; }

bp_status buf_set(void *, bp_tensor *t, const void *data, size_t offset, size_t size, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (size) std::memcpy(tensor_bytes(t) + offset, data, size);
    return BP_OK;
  });
}

bp_status buf_get(void *, const bp_tensor *t, void *data, size_t offset, size_t size, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (size) std::memcpy(data, tensor_bytes(t) + offset, size);
    return BP_OK;
  });
}

bp_status buf_memset(void *, bp_tensor *t, uint8_t value, size_t offset, size_t size, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (size) std::memset(tensor_bytes(t) + offset, value, size);
    return BP_OK;
  });
}

// Both tensors are in host buffers of this plugin: a plain memcpy.
bp_status buf_copy(void *, const bp_tensor *src, bp_tensor *dst, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    size_t n = bp_tensor_nbytes(src);
    if (n != bp_tensor_nbytes(dst))
      return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "blas: copy between tensors of different byte sizes");
    if (n) std::memmove(tensor_bytes(dst), tensor_bytes(src), n);
    return BP_OK;
  });
}

bp_status buf_clear(void *buf, uint8_t value, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    host_buffer *b = as_buffer(buf);
    if (b->size) std::memset(b->data, value, b->size);
    return BP_OK;
  });
}

const bp_buffer_i kBufferIface = {
    sizeof(bp_buffer_i),
    buf_free,
    buf_base,
    nullptr,  // init_tensor: nothing per tensor
    buf_set,
    buf_get,
    buf_memset,
    buf_copy,
    buf_clear,
    nullptr,  // reset
    nullptr,  // set_usage: a hint we have no use for
};

// ---- buffer type ----------------------------------------------------------

const char *buft_name(void *) noexcept { return "BLAS_Host"; }

bp_status buft_alloc(void *, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "blas: buffer output is NULL");
    *out = bp_buffer_ref{nullptr, nullptr};
    // aligned_alloc needs a multiple of the alignment; size 0 still gets a
    // distinct non-NULL base so tensors of 0 bytes have an address.
    size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < size) return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "blas: buffer size overflows");
    if (rounded == 0) rounded = kAlignment;
    void *data = std::aligned_alloc(kAlignment, rounded);
    if (!data) {
      return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY,
                          ("blas: cannot allocate " + std::to_string(size) + " bytes of host memory").c_str());
    }
    auto *b = new (std::nothrow) host_buffer{data, size, true};
    if (!b) {
      std::free(data);
      return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "blas: out of host memory");
    }
    *out = bp_buffer_ref{&kBufferIface, b};
    return BP_OK;
  });
}

size_t buft_alignment(void *) noexcept { return kAlignment; }
int buft_is_host(void *) noexcept { return 1; }

const bp_buffer_type_i kBufferTypeIface = {
    sizeof(bp_buffer_type_i),
    buft_name,
    buft_alloc,
    buft_alignment,
    nullptr,  // max_size: SIZE_MAX
    nullptr,  // alloc_size: bp_tensor_nbytes
    buft_is_host,
};

}  // namespace

bp_buffer_type_ref host_buffer_type() { return bp_buffer_type_ref{&kBufferTypeIface, nullptr}; }

bool is_own_buffer_type(bp_buffer_type_ref ref) { return ref.iface == &kBufferTypeIface; }

bp_status wrap_host_ptr(void *ptr, size_t size, bp_buffer_ref *out, bp_error *err) {
  if (!out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "blas: buffer output is NULL");
  *out = bp_buffer_ref{nullptr, nullptr};
  if (!ptr && size) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "blas: host pointer is NULL");
  *out = bp_buffer_ref{&kBufferIface, new host_buffer{ptr, size, false}};
  return BP_OK;
}

}  // namespace bp::blas
