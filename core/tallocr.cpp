// tallocr.cpp: the linear allocator (bp_tallocr_*) and the helpers that put
// every tensor of a context into one new buffer (bp_context_alloc_tensors*),
// the usual way to allocate weights.
//
// Tensors are placed one after another, each at the buffer type's alignment,
// sized by the type's alloc_size. Views take no space: they alias their
// source once it has memory. One context goes into one buffer; when that is
// larger than the type's max_size the call fails and says so rather than
// splitting silently.
#include <vector>

#include "core/objects.hpp"

using namespace bp::core;

namespace {

void forget_memory(bp_tensor *t) {
  t->buffer = nullptr;
  t->buffer_ctx = nullptr;
  t->data = nullptr;
  t->extra = nullptr;
}

}  // namespace

extern "C" {

BP_API bp_tallocr bp_tallocr_new(bp_buffer *buffer) {
  BP_API_SCOPE();
  bp_tallocr talloc{buffer, 0, 1};
  if (!handle_ok(buffer, TAG_BUFFER)) {
    bad_handle("bp_tallocr_new", "buffer", buffer, TAG_BUFFER);
    return talloc;  // bp_tallocr_alloc reports the bad buffer again
  }
  talloc.alignment = buffer->buft->alignment;
  return talloc;
}

BP_API bp_status bp_tallocr_alloc(bp_tallocr *talloc, bp_tensor *t) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_tallocr_alloc";
    if (talloc == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: talloc is NULL", fn);
    bp_buffer *buf = talloc->buffer;
    if (!handle_ok(buf, TAG_BUFFER)) return bad_handle(fn, "talloc->buffer", buf, TAG_BUFFER);
    if (t == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    if (t->view_src != nullptr) return view_init(t, fn);
    // The buffer type's alignment wins over a caller-edited value.
    size_t alignment = buf->buft->alignment;
    if (talloc->alignment > alignment && (talloc->alignment & (talloc->alignment - 1)) == 0) {
      alignment = talloc->alignment;
    }
    const size_t offset = align_up(talloc->offset, alignment);
    const size_t need = bp_buffer_type_alloc_size(buf->buft, t);
    const size_t left = offset < buf->size ? buf->size - offset : 0;
    if (offset < talloc->offset || need > left) {
      return set_errorf(BP_ERR_OUT_OF_DEVICE_MEMORY,
                        "%s: tensor %s needs %zu bytes but the %zu-byte buffer of '%s' has only %zu left (at offset "
                        "%zu): allocate a larger buffer",
                        fn, describe(t).c_str(), need, buf->size, buf->buft->name.c_str(), left, offset);
    }
    if (bp_status st = bp_buffer_place_tensor(buf, t, offset); st != BP_OK) return st;
    talloc->offset = offset + align_up(need, alignment);
    return BP_OK;
  });
}

BP_API bp_status bp_context_alloc_tensors_from_buft(bp_context *ctx, bp_buffer_type *buft, bp_buffer **out_buffer) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_context_alloc_tensors";
    if (out_buffer == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
    *out_buffer = nullptr;
    if (!handle_ok(ctx, TAG_CONTEXT)) return bad_handle(fn, "ctx", ctx, TAG_CONTEXT);
    if (!handle_ok(buft, TAG_BUFT)) return bad_handle(fn, "buffer type", buft, TAG_BUFT);
    if (bp_status st = check_not_lost(buft->device, fn); st != BP_OK) return st;

    // 1. What to place and how much room it takes.
    std::vector<bp_tensor *> owners, views;
    size_t total = 0;
    const bp_tensor *largest = nullptr;
    size_t largest_size = 0;
    bool overflow = false;
    for (bp_tensor &t : ctx->tensors) {
      if (t.buffer != nullptr || t.data != nullptr) continue;
      if (t.view_src != nullptr) {
        views.push_back(&t);
        continue;
      }
      const size_t need = bp_buffer_type_alloc_size(buft, &t);
      if (need > largest_size) {
        largest = &t;
        largest_size = need;
      }
      const size_t padded = need > SIZE_MAX - buft->alignment ? SIZE_MAX : align_up(need, buft->alignment);
      overflow |= __builtin_add_overflow(total, padded, &total);
      owners.push_back(&t);
    }
    if (overflow) {
      return set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                        "%s: the %zu tensors need more than %zu bytes in one buffer (the size overflows; largest "
                        "tensor %s: %zu bytes): split them over several contexts",
                        fn, owners.size(), SIZE_MAX, describe(largest).c_str(), largest_size);
    }
    if (total > buft->max_size) {
      return set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                        "%s: the %zu tensors need %zu bytes in one buffer but buffer type '%s' allows at most %zu "
                        "bytes per buffer (largest tensor %s: %zu bytes): split them over several contexts",
                        fn, owners.size(), total, buft->name.c_str(), buft->max_size, describe(largest).c_str(),
                        largest_size);
    }

    // 2. One buffer, tensors in creation order.
    bp_buffer *buf = nullptr;
    std::vector<bp_tensor *> placed;
    auto unwind = [&](bp_status st) {
      for (bp_tensor *t : placed) forget_memory(t);
      bp_buffer_free(buf);
      return st;
    };
    if (!owners.empty()) {
      if (bp_status st = bp_buffer_type_alloc(buft, total, &buf); st != BP_OK) return st;
      bp_tallocr talloc = bp_tallocr_new(buf);
      for (bp_tensor *t : owners) {
        if (bp_status st = bp_tallocr_alloc(&talloc, t); st != BP_OK) return unwind(st);
        placed.push_back(t);
      }
    }

    // 3. Views whose source now has memory (here or in an earlier buffer).
    for (bp_tensor *v : views) {
      if (v->view_src->buffer == nullptr) continue;  // source lives elsewhere, unallocated
      if (bp_status st = view_init(v, fn); st != BP_OK) return unwind(st);
      placed.push_back(v);
    }
    *out_buffer = buf;
    return BP_OK;
  });
}

BP_API bp_status bp_context_alloc_tensors(bp_context *ctx, bp_backend *backend, bp_buffer **out_buffer) {
  BP_API_SCOPE();
  if (out_buffer != nullptr) *out_buffer = nullptr;
  if (!handle_ok(backend, TAG_BACKEND)) return bad_handle("bp_context_alloc_tensors", "backend", backend, TAG_BACKEND);
  return bp_context_alloc_tensors_from_buft(ctx, backend->buft, out_buffer);
}

}  // extern "C"
