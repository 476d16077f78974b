// cpu_harness.hpp: drives libbp-cpu.so through its C ABI alone (dlopen,
// descriptor, entry, tables), with hand-made tensors in test-owned memory,
// so these tests check the plugin without the core in between.
#ifndef BP_TESTS_PLUGINS_CPU_HARNESS_HPP_
#define BP_TESTS_PLUGINS_CPU_HARNESS_HPP_

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "backplane/plugin.h"

namespace cpu_test {

inline std::string plugin_path() { return std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so"; }

// Messages the plugin logged through the fake host table, and the node
// spans it reported while |tracing| is set (the clock counts its calls, so
// two readings are equal only when they are one).
struct host_log {
  std::vector<std::string> lines;
  bool tracing = false;
  std::atomic<uint64_t> clock{0};
  std::mutex spans_mutex;
  std::vector<bp_trace_node_span> spans;
};

inline void host_log_fn(void *host, bp_log_level, const char *msg) {
  static_cast<host_log *>(host)->lines.push_back(msg);
}
inline int host_log_enabled(void *, bp_log_level) { return 1; }
inline int host_trace_enabled(void *host) { return static_cast<host_log *>(host)->tracing ? 1 : 0; }
inline uint64_t host_trace_now(void *host) { return ++static_cast<host_log *>(host)->clock; }
inline void host_trace_node(void *host, const bp_trace_node_span *span) {
  auto *h = static_cast<host_log *>(host);
  std::lock_guard<std::mutex> lock(h->spans_mutex);
  h->spans.push_back(*span);
}

// A loaded and initialised plugin with its device and one backend.
class loaded_plugin {
 public:
  // |params|: backend parameters besides threads (e.g. fuse=false).
  explicit loaded_plugin(int threads = 3, std::vector<bp_param_value> params = {}) {
    so_ = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!so_) {
      ADD_FAILURE() << "dlopen " << plugin_path() << ": " << dlerror();
      return;
    }
    desc = static_cast<const bp_plugin_descriptor_t *>(dlsym(so_, BP_PLUGIN_DESCRIPTOR_SYMBOL));
    entry = reinterpret_cast<bp_plugin_entry_fn>(dlsym(so_, BP_PLUGIN_ENTRY_SYMBOL));
    if (!desc || !entry) {
      ADD_FAILURE() << "missing ABI symbols";
      return;
    }
    host_.struct_size = sizeof host_;
    host_.abi_major = BP_PLUGIN_ABI_VERSION;
    host_.abi_minor = BP_PLUGIN_ABI_MINOR;
    host_.host = &log;
    host_.log = host_log_fn;
    host_.log_enabled = host_log_enabled;
    host_.trace_enabled = host_trace_enabled;
    host_.trace_now = host_trace_now;
    host_.trace_node = host_trace_node;
    bp_error err{};
    iface = entry(BP_PLUGIN_ABI_VERSION, &host_, &err);
    // As the host does (ABI 1.2): the host table again, through init_with_host.
    if (!iface || !iface->init_with_host || iface->init_with_host(&host_, &ctx, &err) != BP_OK) {
      ADD_FAILURE() << "entry/init failed: " << err.message;
      iface = nullptr;
      return;
    }
    if (iface->device_get(ctx, 0, &dev, &err) != BP_OK) {
      ADD_FAILURE() << err.message;
      return;
    }
    if (threads >= 0) {
      params.insert(params.begin(), bp_param_value{"threads", BP_PARAM_INT, threads, ""});
      if (dev.iface->backend_init(dev.ctx, params.data(), static_cast<uint32_t>(params.size()), &backend, &err) !=
          BP_OK)
        ADD_FAILURE() << err.message;
    }
  }
  ~loaded_plugin() {
    if (backend.iface) backend.iface->free(backend.ctx);
    if (iface) iface->shutdown(ctx);
    if (so_) dlclose(so_);
  }
  loaded_plugin(const loaded_plugin &) = delete;
  loaded_plugin &operator=(const loaded_plugin &) = delete;

  bool ok() const { return iface && dev.iface && backend.iface; }

  // Runs |nodes| in order; returns the status and fills |err|.
  bp_status compute(std::vector<bp_tensor *> nodes, bp_error *err = nullptr) {
    bp_error local{};
    bp_graph_desc g{sizeof(bp_graph_desc), static_cast<uint32_t>(nodes.size()), nodes.data()};
    return backend.iface->graph_compute(backend.ctx, &g, err ? err : &local);
  }
  bool supports(const bp_tensor *t) { return backend.iface->supports_op(backend.ctx, t) != 0; }

  const bp_plugin_descriptor_t *desc = nullptr;
  bp_plugin_entry_fn entry = nullptr;
  const bp_plugin_i *iface = nullptr;
  void *ctx = nullptr;
  bp_device_ref dev{};
  bp_backend_ref backend{};
  host_log log;

 private:
  void *so_ = nullptr;
  bp_host_api host_{};
};

// Owns tensors and their memory. Tensors are contiguous unless made as views.
class tensor_pool {
 public:
  bp_tensor *make(bp_type type, std::vector<int64_t> ne_in) {
    int64_t ne[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < ne_in.size() && i < 4; ++i) ne[i] = ne_in[i];
    bp_tensor *t = blank(type, ne);
    size_t bytes = bp_type_size(type);
    for (int i = 0; i < 4; ++i) {
      t->nb[i] = bytes;
      bytes *= static_cast<size_t>(ne[i]);
    }
    mem_.emplace_back(bytes + 64, 0xAB);  // 0xAB: garbage a kernel must overwrite
    t->data = mem_.back().data();
    return t;
  }
  // A view of |base| with its own shape/strides at byte |offset|.
  bp_tensor *view(bp_tensor *base, std::vector<int64_t> ne_in, std::vector<size_t> nb_in, size_t offset) {
    int64_t ne[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < ne_in.size(); ++i) ne[i] = ne_in[i];
    bp_tensor *t = blank(base->type, ne);
    for (int i = 0; i < 4; ++i)
      t->nb[i] = i < (int)nb_in.size() ? nb_in[i] : t->nb[i > 0 ? i - 1 : 0] * ne[i > 0 ? i - 1 : 0];
    t->op = BP_OP_VIEW;
    t->view_src = base;
    t->src[0] = base;
    t->view_offs = offset;
    t->data = static_cast<char *>(base->data) + offset;
    return t;
  }
  // Swaps dims |d0| and |d1| of |a| (a permuted view).
  bp_tensor *swap_dims(bp_tensor *a, int d0, int d1) {
    bp_tensor *t = blank(a->type, a->ne);
    *t = *a;
    std::swap(t->ne[d0], t->ne[d1]);
    std::swap(t->nb[d0], t->nb[d1]);
    t->op = BP_OP_PERMUTE;
    t->src[0] = a;
    t->view_src = a;
    return t;
  }
  bp_tensor *node(bp_op op, bp_type type, std::vector<int64_t> ne, std::vector<bp_tensor *> srcs) {
    bp_tensor *t = make(type, ne);
    t->op = op;
    for (size_t i = 0; i < srcs.size(); ++i) t->src[i] = srcs[i];
    return t;
  }

 private:
  bp_tensor *blank(bp_type type, const int64_t *ne) {
    tensors_.emplace_back();
    bp_tensor *t = &tensors_.back();
    std::memset(t, 0, sizeof *t);
    t->struct_size = sizeof(bp_tensor);
    t->type = type;
    for (int i = 0; i < 4; ++i) t->ne[i] = ne[i];
    std::snprintf(t->name, sizeof t->name, "t%zu", tensors_.size());
    return t;
  }
  std::deque<bp_tensor> tensors_;
  std::deque<std::vector<char>> mem_;
};

inline char *at(const bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}
inline double get(const bp_tensor *t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  const char *p = at(t, i0, i1, i2, i3);
  if (t->type == BP_TYPE_F16) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bp_fp16_to_fp32(h);
  }
  if (t->type == BP_TYPE_I32) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
inline void put(const bp_tensor *t, double v, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  char *p = at(t, i0, i1, i2, i3);
  if (t->type == BP_TYPE_F16) {
    uint16_t h = bp_fp32_to_fp16(static_cast<float>(v));
    std::memcpy(p, &h, 2);
  } else if (t->type == BP_TYPE_I32) {
    int32_t i = static_cast<int32_t>(v);
    std::memcpy(p, &i, 4);
  } else {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  }
}

inline void for_each(const bp_tensor *t, const std::function<void(int64_t, int64_t, int64_t, int64_t)> &fn) {
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) fn(i0, i1, i2, i3);
}

// Fills |t| (through its strides) with uniform values in [lo, hi).
inline void fill(const bp_tensor *t, std::mt19937 &rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  for_each(t, [&](int64_t a, int64_t b, int64_t c, int64_t e) { put(t, d(rng), a, b, c, e); });
}

// Checks |t| against |ref| element by element: |x - r| <= tol * max(1, |r|).
inline void expect_close(const bp_tensor *t, const std::function<double(int64_t, int64_t, int64_t, int64_t)> &ref,
                         double tol, const std::string &what) {
  int bad = 0;
  for_each(t, [&](int64_t a, int64_t b, int64_t c, int64_t e) {
    const double r = ref(a, b, c, e), x = get(t, a, b, c, e);
    const bool same_special = (std::isnan(r) && std::isnan(x)) || (std::isinf(r) && r == x);
    if (!same_special && !(std::fabs(x - r) <= tol * std::max(1.0, std::fabs(r)))) {
      if (++bad <= 5)
        ADD_FAILURE() << what << " at [" << a << "," << b << "," << c << "," << e << "]: got " << x << ", want " << r;
    }
  });
  EXPECT_EQ(bad, 0) << what;
}

inline void set_f32_param(bp_tensor *t, int i, float v) { std::memcpy(&t->op_params[i], &v, 4); }

}  // namespace cpu_test

#endif  // BP_TESTS_PLUGINS_CPU_HARNESS_HPP_
