// buffer.cpp: buffers (memory of one buffer type) and placing tensors in
// them: bp_buffer_*, bp_buffer_place_tensor.
//
// A buffer holds one reference to its plugin (plugin_retain) from creation
// to bp_buffer_free, so the .so stays loaded while its memory is in use.
#include <cinttypes>

#include "abi/tables.hpp"  // BP_HAS_SLOT
#include "core/objects.hpp"

using namespace bp::core;

namespace {

bool buffer_ok(const bp_buffer *buf, const char *fn) {
  if (handle_ok(buf, TAG_BUFFER)) return true;
  bad_handle(fn, "buffer", buf, TAG_BUFFER);
  return false;
}

}  // namespace

extern "C" {

BP_API void bp_buffer_free(bp_buffer *buf) {
  BP_API_SCOPE();
  if (buf == nullptr) return;
  if (!free_check(buf, TAG_BUFFER, "bp_buffer_free", "buffer")) return;
  bp::core::plugin_core *plugin = buf->buft->device->plugin;
  // Freeing works even on a lost device: the plugin must release its memory.
  buf->ref.iface->free(buf->ref.ctx);
  retire_handle(buf);
  plugin_release(plugin);
}

BP_API size_t bp_buffer_size(const bp_buffer *buf) {
  BP_API_SCOPE();
  if (!buffer_ok(buf, "bp_buffer_size")) return 0;
  return buf->size;
}

BP_API void *bp_buffer_base(const bp_buffer *buf) {
  BP_API_SCOPE();
  if (!buffer_ok(buf, "bp_buffer_base")) return nullptr;
  return buf->base;
}

BP_API bp_buffer_type *bp_buffer_buffer_type(const bp_buffer *buf) {
  BP_API_SCOPE();
  if (!buffer_ok(buf, "bp_buffer_buffer_type")) return nullptr;
  return buf->buft;
}

BP_API bool bp_buffer_is_host(const bp_buffer *buf) {
  BP_API_SCOPE();
  if (!buffer_ok(buf, "bp_buffer_is_host")) return false;
  return buf->buft->is_host;
}

BP_API bp_status bp_buffer_clear(bp_buffer *buf, uint8_t value) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_buffer_clear";
    bp_device *dev = buffer_device(buf, fn);
    if (dev == nullptr) return BP_ERR_INVALID_ARGUMENT;
    if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
    bp_error err{};
    bp_status st = buf->ref.iface->clear(buf->ref.ctx, value, &err);
    if (st != BP_OK) return plugin_failed(dev, st, err, "clearing a buffer of '" + buf->buft->name + "'");
    return BP_OK;
  });
}

BP_API void bp_buffer_set_usage(bp_buffer *buf, bp_buffer_usage usage) {
  BP_API_SCOPE();
  if (!buffer_ok(buf, "bp_buffer_set_usage")) return;
  if (usage != BP_BUFFER_USAGE_ANY && usage != BP_BUFFER_USAGE_WEIGHTS && usage != BP_BUFFER_USAGE_COMPUTE) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_buffer_set_usage: unknown usage %d: use BP_BUFFER_USAGE_*", (int)usage);
    return;
  }
  buf->usage = usage;
  if (!buf->buft->device->lost.load(std::memory_order_acquire) && BP_HAS_SLOT(buf->ref.iface, bp_buffer_i, set_usage)) {
    buf->ref.iface->set_usage(buf->ref.ctx, usage);
  }
}

BP_API bp_buffer_usage bp_buffer_get_usage(const bp_buffer *buf) {
  BP_API_SCOPE();
  if (!buffer_ok(buf, "bp_buffer_get_usage")) return BP_BUFFER_USAGE_ANY;
  return buf->usage;
}

BP_API bp_status bp_buffer_place_tensor(bp_buffer *buf, bp_tensor *t, size_t offset) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_buffer_place_tensor";
    bp_device *dev = buffer_device(buf, fn);
    if (dev == nullptr) return BP_ERR_INVALID_ARGUMENT;
    if (t == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    // A view owns no memory: it aliases its source wherever that lives.
    if (t->view_src != nullptr) return view_init(t, fn);
    if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
    const bp_buffer_type *buft = buf->buft;
    if (offset % buft->alignment != 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: offset %zu for tensor %s is not a multiple of the alignment %zu of buffer type '%s': "
                        "round it up (bp_tallocr does this)",
                        fn, offset, describe(t).c_str(), buft->alignment, buft->name.c_str());
    }
    const size_t need = bp_buffer_type_alloc_size(buft, t);
    size_t end = 0;
    if (__builtin_add_overflow(offset, need, &end) || end > buf->size) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: tensor %s needs %zu bytes at offset %zu, past the end of the %zu-byte buffer of '%s'", fn,
                        describe(t).c_str(), need, offset, buf->size, buft->name.c_str());
    }
    return bind_tensor(buf, t, static_cast<char *>(buf->base) + offset, describe(t));
  });
}

}  // extern "C"
