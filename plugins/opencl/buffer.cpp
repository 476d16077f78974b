// buffer.cpp: the device's buffer type ("OpenCL<n>") and its buffers: one
// cl_mem each, tensors at byte offsets inside it. base() is an opaque
// address (never dereferenced) unique to the buffer; a tensor's offset is
// data - base. Synchronous transfers use the device's transfer queue and
// block; the backend queue has the asynchronous ones (backend.cpp).
#include <CL/cl.h>

#include <cinttypes>
#include <cstring>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "opencl.hpp"

namespace bp::opencl {
namespace {

cl_buffer *as_buffer(void *buf) {
  auto *b = static_cast<cl_buffer *>(buf);
  return b && b->magic == cl_buffer{}.magic ? b : nullptr;
}

// The device's liveness first, then the shared range check.
bp_status check_range(const cl_buffer *b, const bp_tensor *t, size_t offset, size_t size, const char *what,
                      bp_error *err) {
  if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s needs a buffer", what);
  if (bp_status s = device_check(b->dev, err); s != BP_OK) return s;
  return plugins::window_check({b->base, b->size}, t, offset, size, what, err);
}

// Every buffer call waits for its transfer queue (blocking transfers, or a
// clFinish): a failure there may mean the device is gone.
bp_status cl_fail(cl_buffer *b, bp_error *err, cl_int rc, const char *what, const bp_tensor *t) {
  return device_fail(b->dev, rc, cl_site::wait, std::string(what) + " of tensor '" + (t ? t->name : "?") + "'", err);
}

void buffer_free(void *buf) noexcept {
  cl_buffer *b = as_buffer(buf);
  if (!b) return;
  if (b->mem) clReleaseMemObject(b->mem);
  delete b;
}

void *buffer_base(void *buf) noexcept {
  cl_buffer *b = as_buffer(buf);
  return b ? b->base : nullptr;
}

bp_status buffer_set_tensor(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    cl_buffer *b = as_buffer(buf);
    bp_status s = check_range(b, t, offset, size, "set_tensor", err);
    if (s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "set_tensor with NULL data");
    cl_int rc = clEnqueueWriteBuffer(b->dev->transfer_queue, b->mem, CL_TRUE, offset_of(t, b) + offset, size, data, 0,
                                     nullptr, nullptr);
    return rc == CL_SUCCESS ? BP_OK : cl_fail(b, err, rc, "set_tensor", t);
  });
}

bp_status buffer_get_tensor(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    cl_buffer *b = as_buffer(buf);
    bp_status s = check_range(b, t, offset, size, "get_tensor", err);
    if (s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "get_tensor with NULL data");
    cl_int rc = clEnqueueReadBuffer(b->dev->transfer_queue, b->mem, CL_TRUE, offset_of(t, b) + offset, size, data, 0,
                                    nullptr, nullptr);
    return rc == CL_SUCCESS ? BP_OK : cl_fail(b, err, rc, "get_tensor", t);
  });
}

bp_status fill(cl_buffer *b, uint8_t value, size_t at, size_t size) {
  if (size == 0) return CL_SUCCESS;
  cl_int rc = clEnqueueFillBuffer(b->dev->transfer_queue, b->mem, &value, 1, at, size, 0, nullptr, nullptr);
  if (rc == CL_SUCCESS) rc = clFinish(b->dev->transfer_queue);
  return rc;
}

bp_status buffer_memset_tensor(void *buf, bp_tensor *t, uint8_t value, size_t offset, size_t size,
                               bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    cl_buffer *b = as_buffer(buf);
    bp_status s = check_range(b, t, offset, size, "memset_tensor", err);
    if (s != BP_OK || size == 0) return s;
    cl_int rc = fill(b, value, offset_of(t, b) + offset, size);
    return rc == CL_SUCCESS ? BP_OK : cl_fail(b, err, rc, "memset_tensor", t);
  });
}

bp_status buffer_copy_tensor(void *buf, const bp_tensor *src, bp_tensor *dst, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    cl_buffer *db = as_buffer(buf);
    if (!db) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "copy_tensor needs a buffer");
    cl_buffer *sb = src ? buffer_of(src) : nullptr;
    // Device-side copies only between buffers of one context; anything else
    // goes through the host's generic path.
    if (bp_status s = plugins::copy_precondition(sb && sb->dev->context == db->dev->context, src, dst,
                                                 "within one device", err);
        s != BP_OK)
      return s;
    const size_t n = bp_tensor_nbytes(src);
    bp_status s = check_range(db, dst, 0, n, "copy_tensor", err);
    if (s != BP_OK || n == 0) return s;
    cl_int rc = clEnqueueCopyBuffer(db->dev->transfer_queue, sb->mem, db->mem, offset_of(src, sb), offset_of(dst, db),
                                    n, 0, nullptr, nullptr);
    if (rc == CL_SUCCESS) rc = clFinish(db->dev->transfer_queue);
    return rc == CL_SUCCESS ? BP_OK : cl_fail(db, err, rc, "copy_tensor", dst);
  });
}

bp_status buffer_clear(void *buf, uint8_t value, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    cl_buffer *b = as_buffer(buf);
    if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "clear needs a buffer");
    if (bp_status s = device_check(b->dev, err); s != BP_OK) return s;
    cl_int rc = fill(b, value, 0, b->size);
    return rc == CL_SUCCESS ? BP_OK : cl_fail(b, err, rc, "clear", nullptr);
  });
}

const char *buft_name(void *ctx) noexcept {
  auto *dev = static_cast<device_state *>(ctx);
  return dev ? dev->id.c_str() : "OpenCL";
}

bp_status buft_alloc(void *ctx, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *dev = static_cast<device_state *>(ctx);
    if (!dev || !out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "alloc needs a buffer type and an out ref");
    out->iface = nullptr;
    out->ctx = nullptr;
    if (dev->max_alloc && size > dev->max_alloc)
      return bp_error_setf(
          err, BP_ERR_OUT_OF_DEVICE_MEMORY,
          "%zu bytes exceed the largest single allocation of '%s' (CL_DEVICE_MAX_MEM_ALLOC_SIZE = %" PRIu64
          "); split the tensors over several buffers",
          size, dev->name.c_str(), dev->max_alloc);
    bp_status s = device_open(dev, err);
    if (s != BP_OK) return s;
    // Size 0 still gets a real cl_mem so every buffer has one.
    const size_t bytes = size ? size : dev->alignment;
    cl_int rc = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
    if (!mem || rc != CL_SUCCESS) {
      const bp_status st = status_of(rc);
      if (st != BP_ERR_INTERNAL)
        return device_fail(dev, rc, cl_site::setup, "allocating " + std::to_string(size) + " bytes", err);
      return bp_error_setf(err, BP_ERR_OUT_OF_DEVICE_MEMORY, "cannot allocate %zu bytes on '%s': %s", size,
                           dev->name.c_str(), cl_error_name(rc).c_str());
    }
    auto *b = new (std::nothrow) cl_buffer();
    if (!b) {
      clReleaseMemObject(mem);
      return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    b->dev = dev;
    b->mem = mem;
    b->size = size;
    // A fresh aligned range of the opaque address space, with a gap.
    const uint64_t span = (static_cast<uint64_t>(bytes) + 2 * dev->alignment + 4095) & ~uint64_t(4095);
    b->base = reinterpret_cast<char *>(dev->plugin->next_base.fetch_add(span));
    out->iface = &buffer_iface;
    out->ctx = b;
    return BP_OK;
  });
}

size_t buft_alignment(void *ctx) noexcept {
  auto *dev = static_cast<device_state *>(ctx);
  return dev ? dev->alignment : 128;
}

size_t buft_max_size(void *ctx) noexcept {
  auto *dev = static_cast<device_state *>(ctx);
  return dev && dev->max_alloc ? static_cast<size_t>(dev->max_alloc) : SIZE_MAX;
}

int buft_is_host(void *) noexcept { return 0; }

}  // namespace

const bp_buffer_i buffer_iface = {
    sizeof(bp_buffer_i),
    buffer_free,
    buffer_base,
    nullptr,  // init_tensor: nothing per tensor
    buffer_set_tensor,
    buffer_get_tensor,
    buffer_memset_tensor,
    buffer_copy_tensor,
    buffer_clear,
    nullptr,  // reset
    nullptr,  // set_usage
};

const bp_buffer_type_i buffer_type_iface = {
    sizeof(bp_buffer_type_i),
    buft_name,
    buft_alloc,
    buft_alignment,
    buft_max_size,
    nullptr,  // alloc_size: bp_tensor_nbytes
    buft_is_host,
};

bp_buffer_type_ref buffer_type_of(device_state *dev) { return bp_buffer_type_ref{&buffer_type_iface, dev}; }

cl_buffer *buffer_of(const bp_tensor *t) {
  if (!t || !t->buffer_ctx || !t->data) return nullptr;
  return as_buffer(t->buffer_ctx);
}

}  // namespace bp::opencl
