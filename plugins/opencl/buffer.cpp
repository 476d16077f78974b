// buffer.cpp: the device's buffer type ("OpenCL<n>") and its buffers: one
// cl_mem each, tensors at byte offsets inside it. base() is an opaque
// address (never dereferenced) unique to the buffer; a tensor's offset is
// data - base. Synchronous transfers use the device's transfer queue and
// block; the backend queue has the asynchronous ones (backend.cpp).
#include <CL/cl.h>

#include <cinttypes>
#include <cstring>
#include <new>

#include "buffer_slots.hpp"
#include "opencl.hpp"

namespace bp::opencl {
namespace {

cl_buffer *as_buffer(void *buf) {
  auto *b = static_cast<cl_buffer *>(buf);
  return b && b->magic == cl_buffer{}.magic ? b : nullptr;
}

// Every buffer call waits for its transfer queue (blocking transfers, or a
// clFinish): a failure there may mean the device is gone.
bp_status cl_done(cl_buffer *b, cl_int rc, const char *what, const bp_tensor *t, bp_error *err) {
  if (rc == CL_SUCCESS) return BP_OK;
  return device_fail(b->dev, rc, cl_site::wait, std::string(what) + " of tensor '" + (t ? t->name : "?") + "'", err);
}

cl_int fill(cl_buffer *b, uint8_t value, size_t at, size_t size) {
  if (size == 0) return CL_SUCCESS;
  cl_int rc = clEnqueueFillBuffer(b->dev->transfer_queue, b->mem, &value, 1, at, size, 0, nullptr, nullptr);
  if (rc == CL_SUCCESS) rc = clFinish(b->dev->transfer_queue);
  return rc;
}

// The transport of plugins::buffer_slots: the device's transfer queue.
struct cl_transport {
  using buffer = cl_buffer;
  using type_ctx = device_state;
  static constexpr const char *default_name = "OpenCL";
  static constexpr size_t default_alignment = 128;
  static constexpr const char *copy_where = "within one device";

  static cl_buffer *as_buffer(void *buf) { return opencl::as_buffer(buf); }
  static bp_status alive(cl_buffer *b, bp_error *err) { return device_check(b->dev, err); }
  static plugins::memory_window window(const cl_buffer *b) { return {b->base, b->size}; }
  static void destroy(cl_buffer *b) {
    if (b->mem) clReleaseMemObject(b->mem);
    delete b;
  }
  static bp_status write(cl_buffer *b, const bp_tensor *t, size_t at, const void *data, size_t size, bp_error *err) {
    cl_int rc = clEnqueueWriteBuffer(b->dev->transfer_queue, b->mem, CL_TRUE, at, size, data, 0, nullptr, nullptr);
    return cl_done(b, rc, "set_tensor", t, err);
  }
  static bp_status read(cl_buffer *b, const bp_tensor *t, size_t at, void *data, size_t size, bp_error *err) {
    cl_int rc = clEnqueueReadBuffer(b->dev->transfer_queue, b->mem, CL_TRUE, at, size, data, 0, nullptr, nullptr);
    return cl_done(b, rc, "get_tensor", t, err);
  }
  static bp_status fill(cl_buffer *b, const bp_tensor *t, size_t at, uint8_t value, size_t size, bp_error *err) {
    return cl_done(b, opencl::fill(b, value, at, size), "memset_tensor", t, err);
  }
  static bp_status clear(cl_buffer *b, uint8_t value, bp_error *err) {
    return cl_done(b, opencl::fill(b, value, 0, b->size), "clear", nullptr, err);
  }
  static cl_buffer *source_of(const bp_tensor *src) { return buffer_of(src); }
  // Kernels and copies address memory of their own context only.
  static bool same_memory(const cl_buffer *src, const cl_buffer *dst) { return src->dev->context == dst->dev->context; }
  static bp_status copy(cl_buffer *src, size_t src_at, cl_buffer *dst, size_t dst_at, size_t n, const bp_tensor *t,
                        bp_error *err) {
    cl_int rc =
        clEnqueueCopyBuffer(dst->dev->transfer_queue, src->mem, dst->mem, src_at, dst_at, n, 0, nullptr, nullptr);
    if (rc == CL_SUCCESS) rc = clFinish(dst->dev->transfer_queue);
    return cl_done(dst, rc, "copy_tensor", t, err);
  }

  static const char *name(const device_state *dev) { return dev->id.c_str(); }
  static bp_status alloc(device_state *dev, size_t size, cl_buffer **out, bp_error *err) {
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
      return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    b->dev = dev;
    b->mem = mem;
    b->size = size;
    b->base = plugins::opaque_range(dev->plugin->next_base, bytes, dev->alignment);
    *out = b;
    return BP_OK;
  }
  static size_t alignment(const device_state *dev) { return dev->alignment; }
  static size_t max_size(const device_state *dev) {
    return dev->max_alloc ? static_cast<size_t>(dev->max_alloc) : SIZE_MAX;
  }
  static bool is_host(const device_state *) { return false; }
};

using slots = plugins::buffer_slots<cl_transport>;

}  // namespace

const bp_buffer_type_i &buffer_type_iface = slots::type_table;

bp_buffer_type_ref buffer_type_of(device_state *dev) { return bp_buffer_type_ref{&buffer_type_iface, dev}; }

cl_buffer *buffer_of(const bp_tensor *t) {
  if (!t || !t->buffer_ctx || !t->data) return nullptr;
  return as_buffer(t->buffer_ctx);
}

}  // namespace bp::opencl
