// tensor_data.cpp: moving bytes in and out of tensor memory:
// bp_tensor_set, bp_tensor_get, bp_tensor_memset, bp_tensor_copy.
//
// Offsets and sizes are bytes from t->data inside bp_tensor_nbytes(t), the
// span from the first to one past the last element. For a non-contiguous
// tensor that span includes the gaps between rows; the calls move the raw
// bytes of [offset, offset + size) of it (docs/ownership.md).
#include <algorithm>
#include <cstring>
#include <vector>

#include "abi/tables.hpp"  // BP_HAS_SLOT
#include "core/objects.hpp"

using namespace bp::core;

namespace {

// The buffer and device of |t| after the common checks (handle, memory,
// lost device); nullptr with the error set otherwise.
bp_buffer *usable_buffer(const bp_tensor *t, const char *fn, const char *what, bp_status *status) {
  bp_buffer *buf = tensor_buffer(t, fn, what);
  if (buf == nullptr) {
    *status = last_status();  // what tensor_buffer recorded: one condition, one status
    return nullptr;
  }
  *status = check_not_lost(buf->buft->device, fn);
  return *status == BP_OK ? buf : nullptr;
}

bp_status raw_set(bp_buffer *buf, bp_tensor *t, const void *data, size_t offset, size_t size) {
  bp_error err{};
  bp_status st = buf->ref.iface->set_tensor(buf->ref.ctx, t, data, offset, size, &err);
  if (st != BP_OK) return plugin_failed(buf->buft->device, st, err, "writing tensor " + describe(t));
  return BP_OK;
}

bp_status raw_get(bp_buffer *buf, const bp_tensor *t, void *data, size_t offset, size_t size) {
  bp_error err{};
  bp_status st = buf->ref.iface->get_tensor(buf->ref.ctx, t, data, offset, size, &err);
  if (st != BP_OK) return plugin_failed(buf->buft->device, st, err, "reading tensor " + describe(t));
  return BP_OK;
}

bool same_layout(const bp_tensor *a, const bp_tensor *b) {
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) return false;
  }
  return true;
}

}  // namespace

extern "C" {

BP_API bp_status bp_tensor_set(bp_tensor *t, const void *data, size_t offset, size_t size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_tensor_set";
    bp_status st = BP_OK;
    bp_buffer *buf = usable_buffer(t, fn, "tensor", &st);
    if (buf == nullptr) return st;
    if (data == nullptr && size != 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    if ((st = check_range(t, offset, size, fn)) != BP_OK) return st;
    if (size == 0) return BP_OK;
    return raw_set(buf, t, data, offset, size);
  });
}

BP_API bp_status bp_tensor_get(const bp_tensor *t, void *data, size_t offset, size_t size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_tensor_get";
    bp_status st = BP_OK;
    bp_buffer *buf = usable_buffer(t, fn, "tensor", &st);
    if (buf == nullptr) return st;
    if (data == nullptr && size != 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    if ((st = check_range(t, offset, size, fn)) != BP_OK) return st;
    if (size == 0) return BP_OK;
    return raw_get(buf, t, data, offset, size);
  });
}

BP_API bp_status bp_tensor_memset(bp_tensor *t, uint8_t value, size_t offset, size_t size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_tensor_memset";
    bp_status st = BP_OK;
    bp_buffer *buf = usable_buffer(t, fn, "tensor", &st);
    if (buf == nullptr) return st;
    if ((st = check_range(t, offset, size, fn)) != BP_OK) return st;
    if (size == 0) return BP_OK;
    if (BP_HAS_SLOT(buf->ref.iface, bp_buffer_i, memset_tensor)) {
      bp_error err{};
      st = buf->ref.iface->memset_tensor(buf->ref.ctx, t, value, offset, size, &err);
      if (st != BP_OK) return plugin_failed(buf->buft->device, st, err, "filling tensor " + describe(t));
      return BP_OK;
    }
    // Default: write a filled host scratch chunk by chunk (bounded memory).
    const size_t chunk = std::min<size_t>(size, size_t(1) << 20);
    std::vector<uint8_t> scratch(chunk, value);
    for (size_t done = 0; done < size; done += chunk) {
      const size_t n = std::min(chunk, size - done);
      if ((st = raw_set(buf, t, scratch.data(), offset + done, n)) != BP_OK) return st;
    }
    return BP_OK;
  });
}

BP_API bp_status bp_tensor_copy(const bp_tensor *src, bp_tensor *dst) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_tensor_copy";
    bp_status st = BP_OK;
    bp_buffer *src_buf = usable_buffer(src, fn, "src", &st);
    if (src_buf == nullptr) return st;
    bp_buffer *dst_buf = usable_buffer(dst, fn, "dst", &st);
    if (dst_buf == nullptr) return st;
    const size_t n = bp_tensor_nbytes(src);
    if (src->type != dst->type || n != bp_tensor_nbytes(dst)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: src %s (%zu bytes) and dst %s (%zu bytes) differ in type or size: copy between tensors "
                        "of one type and byte size, or use bp_cpy in a graph to convert",
                        fn, describe(src).c_str(), n, describe(dst).c_str(), bp_tensor_nbytes(dst));
    }
    // A raw byte copy is only the same tensor when both are dense or both
    // have the same strides.
    if (!(bp_tensor_is_contiguous(src) && bp_tensor_is_contiguous(dst)) && !same_layout(src, dst)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: src %s and dst %s have different layouts: bytes cannot be copied as they are; use bp_cpy "
                        "in a graph (or bp_cont first)",
                        fn, describe(src).c_str(), describe(dst).c_str());
    }
    if (src->buffer == dst->buffer && src->data == dst->data) return BP_OK;

    // 1. Same plugin: its own copy (device to device), if it has one.
    bp_device *src_dev = src_buf->buft->device, *dst_dev = dst_buf->buft->device;
    if (src_dev->plugin == dst_dev->plugin && BP_HAS_SLOT(dst_buf->ref.iface, bp_buffer_i, copy_tensor)) {
      bp_error err{};
      st = dst_buf->ref.iface->copy_tensor(dst_buf->ref.ctx, src, dst, &err);
      if (st == BP_OK) return BP_OK;
      if (st != BP_ERR_UNIMPLEMENTED) {
        return plugin_failed(dst_dev, st, err, "copying " + describe(src) + " into " + describe(dst));
      }
    }
    // 2. One side is host memory: one transfer, no staging.
    if (src_buf->buft->is_host) return raw_set(dst_buf, dst, src->data, 0, n);
    if (dst_buf->buft->is_host) return raw_get(src_buf, src, dst->data, 0, n);
    // 3. Device to device of different plugins: stage through host memory.
    std::vector<uint8_t> staging(n);
    if ((st = raw_get(src_buf, src, staging.data(), 0, n)) != BP_OK) return st;
    return raw_set(dst_buf, dst, staging.data(), 0, n);
  });
}

}  // extern "C"
