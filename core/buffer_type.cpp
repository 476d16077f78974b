// buffer_type.cpp: buffer types (a kind of memory of a device) and the
// device calls that hand them out: buffer_type_wrap, bp_buffer_type_*,
// bp_device_buffer_type, bp_device_host_buffer_type, bp_device_weight_buffer_type,
// bp_device_buffer_from_host_ptr.
//
// A wrapped type caches what the plugin said once (name, alignment, max size,
// is_host) so hot paths never call the plugin for them. Wrapped types live
// with their device (and so with the plugin), never with a backend: buffers
// made from a type may outlive every backend.
#include <cinttypes>
#include <cstring>

#include "abi/tables.hpp"
#include "core/objects.hpp"

namespace bp::core {

namespace {

// |why| says what is wrong and which rule; no advice to rebuild: a bad
// value is the plugin's bug, not a header mismatch.
bp_status bad_table(const bp_device *dev, const std::string &why) {
  return set_error(BP_ERR_INCOMPATIBLE, plugin_name(dev) + ": device '" + device_label(dev) + "': " + why);
}

bool same_ref(const bp_buffer_type_ref &a, const bp_buffer_type_ref &b) { return a.iface == b.iface && a.ctx == b.ctx; }

}  // namespace

std::unique_ptr<bp_buffer_type> buffer_type_wrap(bp_device *dev, bp_buffer_type_ref ref) {
  const bp_buffer_type_i *i = ref.iface;
  std::string why = bp::abi::check_table(bp::abi::buffer_type_table, i);
  if (!why.empty()) {
    bad_table(dev, why);
    return nullptr;
  }
  auto buft = std::make_unique<bp_buffer_type>();
  buft->device = dev;
  buft->ref = ref;
  const char *name = i->name(ref.ctx);
  buft->name = name != nullptr ? std::string(name, strnlen(name, 256)) : std::string("?");
  buft->alignment = i->alignment(ref.ctx);
  if (buft->alignment == 0 || (buft->alignment & (buft->alignment - 1)) != 0) {
    bad_table(dev, "buffer type '" + buft->name + "' reports alignment " + std::to_string(buft->alignment) +
                       ", which is not a power of two (PLG-9)");
    return nullptr;
  }
  if (BP_HAS_SLOT(i, bp_buffer_type_i, max_size)) {
    buft->max_size = i->max_size(ref.ctx);
    if (buft->max_size == 0) {
      bad_table(dev, "buffer type '" + buft->name + "' reports a max_size of 0 (PLG-9)");
      return nullptr;
    }
  }
  buft->is_host = BP_HAS_SLOT(i, bp_buffer_type_i, is_host) && i->is_host(ref.ctx) != 0;
  return buft;
}

bp_buffer_type *device_buft_for(bp_device *dev, bp_buffer_type_ref ref) {
  std::lock_guard<std::mutex> lock(dev->extra_bufts_mutex);
  if (dev->buft && same_ref(dev->buft->ref, ref)) return dev->buft.get();
  if (dev->host_buft && same_ref(dev->host_buft->ref, ref)) return dev->host_buft.get();
  if (dev->weight_buft && same_ref(dev->weight_buft->ref, ref)) return dev->weight_buft.get();
  for (const auto &b : dev->extra_bufts) {
    if (same_ref(b->ref, ref)) return b.get();
  }
  std::unique_ptr<bp_buffer_type> wrapped = buffer_type_wrap(dev, ref);
  if (!wrapped) return nullptr;
  dev->extra_bufts.push_back(std::move(wrapped));
  return dev->extra_bufts.back().get();
}

}  // namespace bp::core

using namespace bp::core;

namespace {

// Checks a buffer-type handle; sets the error naming |fn| if it is bad.
bool buft_ok(const bp_buffer_type *buft, const char *fn) {
  if (handle_ok(buft, TAG_BUFT)) return true;
  bad_handle(fn, "buffer type", buft, TAG_BUFT);
  return false;
}

bool device_ok(const bp_device *dev, const char *fn) {
  if (handle_ok(dev, TAG_DEVICE)) return true;
  bad_handle(fn, "device", dev, TAG_DEVICE);
  return false;
}

// Checks the buffer table a plugin returned and wraps it in a new handle.
// Takes the plugin's buffer either way (frees it when the table is bad).
bp_status wrap_buffer(bp_buffer_type *buft, bp_buffer_ref ref, size_t size, const char *fn, bp_buffer **out) {
  bp_device *dev = buft->device;
  const bp_buffer_i *i = ref.iface;
  std::string why = bp::abi::check_table(bp::abi::buffer_table, i);
  if (!why.empty()) {
    if (BP_HAS_SLOT(i, bp_buffer_i, free)) i->free(ref.ctx);
    return set_errorf(BP_ERR_INCOMPATIBLE, "%s: %s: the buffer buffer type '%s' returned: %s", fn,
                      plugin_name(dev).c_str(), buft->name.c_str(), why.c_str());
  }
  auto *buf = new (std::nothrow) bp_buffer();
  if (buf == nullptr) {
    i->free(ref.ctx);
    return set_errorf(BP_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
  }
  buf->buft = buft;
  buf->ref = ref;
  buf->size = size;
  buf->base = i->base(ref.ctx);
  plugin_retain(dev->plugin);
  *out = buf;
  return BP_OK;
}

}  // namespace

extern "C" {

BP_API const char *bp_buffer_type_name(const bp_buffer_type *buft) {
  BP_API_SCOPE();
  if (!buft_ok(buft, "bp_buffer_type_name")) return nullptr;
  return buft->name.c_str();
}

BP_API bp_status bp_buffer_type_alloc(bp_buffer_type *buft, size_t size, bp_buffer **out_buffer) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_buffer_type_alloc";
    if (out_buffer == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
    *out_buffer = nullptr;
    if (!buft_ok(buft, fn)) return BP_ERR_INVALID_ARGUMENT;
    bp_device *dev = buft->device;
    if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
    if (size > buft->max_size) {
      return set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                        "%s: %zu bytes exceed the largest buffer of type '%s' (%zu bytes): use smaller buffers", fn,
                        size, buft->name.c_str(), buft->max_size);
    }
    bp_error err{};
    bp_buffer_ref ref{};
    bp_status st = buft->ref.iface->alloc(buft->ref.ctx, size, &ref, &err);
    if (st != BP_OK) {
      return plugin_failed(dev, st, err, "allocating " + std::to_string(size) + " bytes of '" + buft->name + "'");
    }
    return wrap_buffer(buft, ref, size, fn, out_buffer);
  });
}

BP_API size_t bp_buffer_type_alignment(const bp_buffer_type *buft) {
  BP_API_SCOPE();
  if (!buft_ok(buft, "bp_buffer_type_alignment")) return 0;
  return buft->alignment;
}

BP_API size_t bp_buffer_type_max_size(const bp_buffer_type *buft) {
  BP_API_SCOPE();
  if (!buft_ok(buft, "bp_buffer_type_max_size")) return 0;
  return buft->max_size;
}

BP_API size_t bp_buffer_type_alloc_size(const bp_buffer_type *buft, const bp_tensor *t) {
  BP_API_SCOPE();
  if (!buft_ok(buft, "bp_buffer_type_alloc_size")) return 0;
  if (t == nullptr) {
    set_error(BP_ERR_INVALID_ARGUMENT, "bp_buffer_type_alloc_size: tensor is NULL");
    return 0;
  }
  const size_t nbytes = bp_tensor_nbytes(t);
  if (buft->device->lost.load(std::memory_order_acquire) ||
      !BP_HAS_SLOT(buft->ref.iface, bp_buffer_type_i, alloc_size)) {
    return nbytes;
  }
  // Never trust a plugin to ask for less than the tensor spans.
  const size_t asked = buft->ref.iface->alloc_size(buft->ref.ctx, t);
  return asked > nbytes ? asked : nbytes;
}

BP_API bool bp_buffer_type_is_host(const bp_buffer_type *buft) {
  BP_API_SCOPE();
  if (!buft_ok(buft, "bp_buffer_type_is_host")) return false;
  return buft->is_host;
}

BP_API bp_device *bp_buffer_type_device(const bp_buffer_type *buft) {
  BP_API_SCOPE();
  if (!buft_ok(buft, "bp_buffer_type_device")) return nullptr;
  return buft->device;
}

BP_API bp_buffer_type *bp_device_buffer_type(bp_device *dev) {
  return api_guard_ptr<bp_buffer_type>([&]() -> bp_buffer_type * {
    const char *fn = "bp_device_buffer_type";
    if (!device_ok(dev, fn)) return nullptr;
    std::lock_guard<std::mutex> lock(dev->extra_bufts_mutex);
    if (!dev->buft) {
      // The registry normally wraps it when it creates the device; this
      // covers a device made without it.
      if (!BP_HAS_SLOT(dev->ref.iface, bp_device_i, buffer_type)) {
        set_errorf(BP_ERR_INCOMPATIBLE, "%s: %s: device '%s' has no buffer_type slot", fn, plugin_name(dev).c_str(),
                   device_label(dev).c_str());
        return nullptr;
      }
      dev->buft = buffer_type_wrap(dev, dev->ref.iface->buffer_type(dev->ref.ctx));
    }
    return dev->buft.get();
  });
}

BP_API bp_buffer_type *bp_device_host_buffer_type(bp_device *dev) {
  return api_guard_ptr<bp_buffer_type>([&]() -> bp_buffer_type * {
    const char *fn = "bp_device_host_buffer_type";
    if (!device_ok(dev, fn)) return nullptr;
    std::lock_guard<std::mutex> lock(dev->extra_bufts_mutex);
    if (!dev->host_buft && BP_HAS_SLOT(dev->ref.iface, bp_device_i, host_buffer_type)) {
      bp_buffer_type_ref ref = dev->ref.iface->host_buffer_type(dev->ref.ctx);
      if (ref.iface != nullptr) dev->host_buft = buffer_type_wrap(dev, ref);
    }
    if (!dev->host_buft) {
      set_errorf(BP_ERR_UNIMPLEMENTED, "%s: device '%s' has no pinned host buffer type", fn, device_label(dev).c_str());
    }
    return dev->host_buft.get();
  });
}

BP_API bp_buffer_type *bp_device_weight_buffer_type(bp_device *dev) {
  return api_guard_ptr<bp_buffer_type>([&]() -> bp_buffer_type * {
    const char *fn = "bp_device_weight_buffer_type";
    if (!device_ok(dev, fn)) return nullptr;
    std::lock_guard<std::mutex> lock(dev->extra_bufts_mutex);
    if (!dev->weight_buft && BP_HAS_SLOT(dev->ref.iface, bp_device_i, weight_buffer_type)) {
      bp_buffer_type_ref ref = dev->ref.iface->weight_buffer_type(dev->ref.ctx);
      if (ref.iface != nullptr) dev->weight_buft = buffer_type_wrap(dev, ref);
    }
    if (!dev->weight_buft) {
      set_errorf(BP_ERR_UNIMPLEMENTED, "%s: device '%s' has no weight buffer type (weights go to its default type)", fn,
                 device_label(dev).c_str());
    }
    return dev->weight_buft.get();
  });
}

BP_API bp_status bp_device_buffer_from_host_ptr(bp_device *dev, void *ptr, size_t size, bp_buffer **out_buffer) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_device_buffer_from_host_ptr";
    if (out_buffer == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
    *out_buffer = nullptr;
    if (!device_ok(dev, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (ptr == nullptr && size != 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: ptr is NULL", fn);
    if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
    if (!BP_HAS_SLOT(dev->ref.iface, bp_device_i, buffer_from_host_ptr)) {
      return set_errorf(BP_ERR_UNIMPLEMENTED,
                        "%s: device '%s' cannot wrap host memory (no BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR): allocate "
                        "a buffer and copy with bp_tensor_set",
                        fn, device_label(dev).c_str());
    }
    // The buffer's type: the pinned host type when there is one (host memory
    // the device reads), else the default type.
    bp_buffer_type *buft = bp_device_host_buffer_type(dev);
    if (buft == nullptr) buft = bp_device_buffer_type(dev);
    if (buft == nullptr) return BP_ERR_INCOMPATIBLE;
    bp_clear_error();
    bp_error err{};
    bp_buffer_ref ref{};
    bp_status st = dev->ref.iface->buffer_from_host_ptr(dev->ref.ctx, ptr, size, &ref, &err);
    if (st != BP_OK) {
      return plugin_failed(dev, st, err, "wrapping " + std::to_string(size) + " bytes of host memory");
    }
    return wrap_buffer(buft, ref, size, fn, out_buffer);
  });
}

}  // extern "C"
