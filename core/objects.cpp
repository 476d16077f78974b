// objects.cpp: the helpers of objects.hpp (handle checks, device-lost rule,
// plugin error annotation, freed-handle quarantine, view initialisation).
#include "core/objects.hpp"

#include <cstdio>
#include <deque>
#include <mutex>
#include <unordered_set>

#include "abi/tables.hpp"  // BP_HAS_SLOT
#include "core/log.hpp"

namespace bp::core {

namespace {

const char *tag_name(uint32_t tag) {
  switch (tag) {
    case TAG_PLUGIN:
      return "a plugin";
    case TAG_DEVICE:
      return "a device";
    case TAG_BUFT:
      return "a buffer type";
    case TAG_BUFFER:
      return "a buffer";
    case TAG_BACKEND:
      return "a backend";
    case TAG_EVENT:
      return "an event";
    case TAG_CONTEXT:
      return "a context";
    case TAG_GRAPH:
      return "a graph";
    case TAG_SCHED:
      return "a scheduler";
    case TAG_GALLOCR:
      return "a graph allocator";
    case TAG_PLAN:
      return "a graph plan";
    case TAG_GGUF_FILE:
      return "a GGUF file";
    case TAG_GGUF_WEIGHTS:
      return "a set of GGUF weights";
    case TAG_GGUF_WRITER:
      return "a GGUF writer";
    case TAG_DEAD:
      return "a freed handle";
    default:
      return nullptr;
  }
}

// Storage of freed handles kept so a later use reads TAG_DEAD. Bounded:
// the oldest storage is released when the ring is full.
struct quarantine {
  std::mutex mutex;
  std::deque<void *> ring;
  static constexpr size_t capacity = 256;

  void add(void *p) {
    void *old = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      try {
        ring.push_back(p);
      } catch (...) {
        old = p;  // no room to remember it: release at once
      }
      if (old == nullptr && ring.size() > capacity) {
        old = ring.front();
        ring.pop_front();
      }
    }
    if (old != nullptr) ::operator delete(old);
  }
};

struct live_set {
  std::mutex mutex;
  std::unordered_set<const void *> marks;
};
// Never destroyed: handles may be freed while the process exits.
live_set &lives() {
  static live_set *s = new live_set();
  return *s;
}

}  // namespace

void live_mark::enter() noexcept {
  live_set &s = lives();
  std::lock_guard<std::mutex> lock(s.mutex);
  try {
    s.marks.insert(this);
  } catch (...) {
    // Out of memory: the handle is then refused by its free function (a
    // leak) rather than the process ending here.
  }
}

void live_mark::leave() noexcept {
  live_set &s = lives();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.marks.erase(this);
}

bool live_mark::live() const noexcept {
  live_set &s = lives();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.marks.count(this) != 0;
}

bool free_check_live(bool live, const void *h, handle_tag tag, const char *fn, const char *what) {
  if (live) return true;
  set_errorf(BP_ERR_INVALID_ARGUMENT,
             "%s: %s %p was already freed, or is not %s the API returned: free each handle exactly once", fn, what, h,
             tag_name(tag));
  log(BP_LOG_ERROR, "core", bp_last_error());
  return false;
}

void quarantine_storage(void *h) {
  static quarantine *q = new quarantine();  // never destroyed: handles may be freed during exit
  q->add(h);
}

bp_status bad_handle(const char *fn, const char *what, const void *h, handle_tag expected) {
  if (h == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
  const uint32_t tag = *static_cast<const uint32_t *>(h);
  if (tag == TAG_DEAD) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s was already freed: keep using a live handle", fn, what);
  }
  const char *actual = tag_name(tag);
  return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is not %s (%s): pass the handle the API returned", fn, what,
                    tag_name(expected), actual ? actual : "unknown object");
}

std::string plugin_name(const bp_device *dev) {
  if (dev == nullptr || dev->plugin == nullptr || dev->plugin->name.empty()) return "?";
  return dev->plugin->name;
}

std::string device_label(const bp_device *dev) {
  if (dev == nullptr) return "?";
  if (!dev->spec.empty()) return dev->spec;
  return plugin_name(dev) + ":" + std::to_string(dev->index);
}

bp_status check_not_lost(const bp_device *dev, const char *fn) {
  if (dev != nullptr && dev->lost.load(std::memory_order_acquire)) {
    return set_errorf(BP_ERR_DEVICE_LOST,
                      "%s: device '%s' was lost earlier: free its buffers, backends and events; it stays unusable "
                      "until its plugin is reloaded",
                      fn, device_label(dev).c_str());
  }
  return BP_OK;
}

bp_status plugin_failed(bp_device *dev, bp_status code, const bp_error &err, const std::string &what) {
  if (code == BP_ERR_DEVICE_LOST && dev != nullptr) {
    dev->lost.store(true, std::memory_order_release);
    log(BP_LOG_ERROR, "core", "device '" + device_label(dev) + "' lost during " + what);
  }
  return set_plugin_error(code, err, plugin_name(dev) + ": " + what);
}

bp_device *buffer_device(const bp_buffer *buf, const char *fn) {
  if (!handle_ok(buf, TAG_BUFFER)) {
    bad_handle(fn, "buffer", buf, TAG_BUFFER);
    return nullptr;
  }
  return buf->buft->device;
}

bp_buffer *tensor_buffer(const bp_tensor *t, const char *fn, const char *what) {
  if (t == nullptr) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    return nullptr;
  }
  if (t->buffer == nullptr) {
    if (t->view_src != nullptr && t->view_src->buffer == nullptr) {
      set_errorf(BP_ERR_FAILED_PRECONDITION,
                 "%s: tensor %s has no memory: it is a view of %s, which has none; allocate that with "
                 "bp_context_alloc_tensors or a graph allocator",
                 fn, describe(t).c_str(), describe(t->view_src).c_str());
    } else {
      set_errorf(BP_ERR_FAILED_PRECONDITION,
                 "%s: tensor %s has no memory: allocate it with bp_context_alloc_tensors or a graph allocator", fn,
                 describe(t).c_str());
    }
    return nullptr;
  }
  if (!handle_ok(t->buffer, TAG_BUFFER)) {
    set_errorf(BP_ERR_FAILED_PRECONDITION,
               "%s: tensor %s points to a buffer that was freed: allocate it again before using it", fn,
               describe(t).c_str());
    return nullptr;
  }
  return t->buffer;
}

bp_status view_init(bp_tensor *t, const char *fn) {
  bp_tensor *src = t->view_src;
  if (src == nullptr) {
    return set_errorf(BP_ERR_INTERNAL, "%s: tensor %s is not a view", fn, describe(t).c_str());
  }
  bp_buffer *buf = src->buffer;
  if (buf == nullptr) {
    return set_errorf(BP_ERR_FAILED_PRECONDITION,
                      "%s: view %s takes its memory from %s, which has none yet: allocate the source first", fn,
                      describe(t).c_str(), describe(src).c_str());
  }
  if (!handle_ok(buf, TAG_BUFFER)) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: the source %s of view %s points to a freed buffer", fn,
                      describe(src).c_str(), describe(t).c_str());
  }
  bp_device *dev = buf->buft->device;
  if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
  return bind_tensor(buf, t, static_cast<char *>(src->data) + t->view_offs, "view " + describe(t));
}

bp_status bind_tensor(bp_buffer *buf, bp_tensor *t, void *data, const std::string &what) {
  t->buffer = buf;
  t->buffer_ctx = buf->ref.ctx;
  t->data = data;
  t->extra = nullptr;  // a plugin's per-tensor state from an earlier buffer is stale
  if (BP_HAS_SLOT(buf->ref.iface, bp_buffer_i, init_tensor)) {
    bp_error err{};
    bp_status st = buf->ref.iface->init_tensor(buf->ref.ctx, t, &err);
    if (st != BP_OK) {
      t->buffer = nullptr;
      t->buffer_ctx = nullptr;
      t->data = nullptr;
      return plugin_failed(buf->buft->device, st, err, "init_tensor of " + what);
    }
  }
  return BP_OK;
}

bp_status check_range(const bp_tensor *t, size_t offset, size_t size, const char *fn) {
  const size_t nbytes = bp_tensor_nbytes(t);
  size_t end = 0;
  if (__builtin_add_overflow(offset, size, &end) || end > nbytes) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT,
                      "%s: bytes [%zu, %zu + %zu) are outside tensor %s, which spans %zu bytes: keep offset + size "
                      "<= bp_tensor_nbytes",
                      fn, offset, offset, size, describe(t).c_str(), nbytes);
  }
  return BP_OK;
}

}  // namespace bp::core
