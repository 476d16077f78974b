// backend.cpp: a vulkan backend, i.e. a command stream on its device's
// queue. Work (graphs, async transfers) is recorded into the current command
// buffer and submitted on flush (graph_compute, synchronize, events);
// command buffers are recycled once the timeline passes their submission.
// synchronize waits for the last submission, finishes async reads (staging
// -> caller memory) and reports a bad GET_ROWS id seen by a shader.
#include <algorithm>
#include <cstring>

#include "backplane/plugin_guard.hpp"
#include "buffer_slots.hpp"
#include "op_codes.h"  // the status buffer's words
#include "vulkan.hpp"

namespace bp::vk {

void cmd_begin_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr,
                     VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                     VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(
      cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void cmd_end_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr,
                     VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

// profile=true: one line per op and shader variant, the most expensive first.
void log_profile(const backend_ctx *be) {
  std::vector<std::pair<std::string, profile_entry>> rows(be->profile.begin(), be->profile.end());
  std::sort(rows.begin(), rows.end(), [](const auto &x, const auto &y) { return x.second.ms > y.second.ms; });
  double total = 0;
  for (const auto &r : rows) total += r.second.ms;
  const bp_host_api *host = be->dev->plugin->host;
  bp_host_logf(host, BP_LOG_INFO, "profile of %s: %.3f ms of GPU time in all", be->dev->name.c_str(), total);
  for (const auto &r : rows)
    bp_host_logf(host, BP_LOG_INFO, "profile: %-32s %7llu dispatches %10.3f ms %8.1f us each %5.1f%%", r.first.c_str(),
                 static_cast<unsigned long long>(r.second.count), r.second.ms, 1e3 * r.second.ms / r.second.count,
                 total > 0 ? 100 * r.second.ms / total : 0.0);
}

backend_ctx::~backend_ctx() {
  bp_error ignored{};
  closing = true;  // the traced graphs' nodes may be freed by now: not reported
  backend_sync(this, &ignored);
  trace_harvest(this, 0);  // frees the query pools even if the wait failed
  if (opt.profile) log_profile(this);
  device_wait_all(dev, nullptr);
  for (vk_buffer *b : staging) buffer_destroy(b);
  buffer_destroy(status);
  buffer_destroy(scratch);
  if (pool) vkDestroyCommandPool(dev->dev, pool, nullptr);
}

bp_status backend_begin(backend_ctx *be, VkCommandBuffer *out, bp_error *err) {
  if (bp_status st = device_check(be->dev, err); st != BP_OK) return st;
  if (be->recording >= 0) {
    *out = be->slots[static_cast<size_t>(be->recording)].cb;
    return BP_OK;
  }
  uint64_t done = 0;
  vkGetSemaphoreCounterValue(be->dev->dev, be->dev->timeline, &done);
  int pick = -1;
  for (size_t i = 0; i < be->slots.size(); ++i)
    if (be->slots[i].value <= done) {
      pick = static_cast<int>(i);
      break;
    }
  if (pick < 0) {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, be->pool,
                                   VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    cmd_slot s;
    VkResult r = vkAllocateCommandBuffers(be->dev->dev, &ai, &s.cb);
    if (r != VK_SUCCESS) return device_fail(be->dev, r, "vkAllocateCommandBuffers", err);
    be->slots.push_back(s);
    pick = static_cast<int>(be->slots.size() - 1);
  }
  VkCommandBuffer cb = be->slots[static_cast<size_t>(pick)].cb;
  vkResetCommandBuffer(cb, 0);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr,
                              VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, nullptr};
  VkResult r = vkBeginCommandBuffer(cb, &bi);
  if (r != VK_SUCCESS) return device_fail(be->dev, r, "vkBeginCommandBuffer", err);
  cmd_begin_barrier(cb);
  be->recording = pick;
  *out = cb;
  return BP_OK;
}

bp_status backend_flush(backend_ctx *be, bp_error *err) {
  if (be->recording < 0) return device_check(be->dev, err);
  cmd_slot &s = be->slots[static_cast<size_t>(be->recording)];
  be->recording = -1;
  cmd_end_barrier(s.cb);
  VkResult r = vkEndCommandBuffer(s.cb);
  if (r != VK_SUCCESS) return device_fail(be->dev, r, "vkEndCommandBuffer", err);
  uint64_t v = 0;
  if (bp_status st = device_submit(be->dev, s.cb, &v, err); st != BP_OK) return st;
  s.value = v;
  be->last = v;
  return BP_OK;
}

bp_status backend_sync(backend_ctx *be, bp_error *err) {
  bp_status st = backend_flush(be, err);
  if (st == BP_OK) st = device_wait(be->dev, be->last, err);
  // The graphs are still valid here (until synchronize, by contract).
  if (st == BP_OK && !be->traced.empty()) trace_harvest(be, bp_host_trace_now(be->dev->plugin->host));
  if (st == BP_OK)
    for (const pending_read &pr : be->reads) std::memcpy(pr.dst, pr.staging->mapped, pr.size);
  be->reads.clear();
  for (vk_buffer *b : be->staging) buffer_destroy(b);
  be->staging.clear();
  if (st != BP_OK || !be->status) return st;
  auto *words = reinterpret_cast<uint32_t *>(be->status->mapped);
  if (const uint32_t *s = words + BP_VK_STATUS_SET_ROWS; s[0] != 0) {
    const int32_t id = static_cast<int32_t>(s[1]);
    const uint32_t at = s[2], rows = s[3], label = s[4];
    std::memset(words, 0, 64);  // GET_ROWS's report too: one error per synchronize
    if (label < be->set_rows_labels.size()) {
      const set_rows_label &l = be->set_rows_labels[label];
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                           "SET_ROWS node '%s': row id %d at [%u] of ids '%s' is out of range; '%s' has rows 0..%d",
                           l.node.c_str(), id, at, l.ids.c_str(), l.dst.c_str(), static_cast<int>(rows) - 1);
    }
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                         "SET_ROWS: row id %d at [%u] of ids is out of range; the destination has rows 0..%d", id, at,
                         static_cast<int>(rows) - 1);
  }
  if (words[0] != 0) {
    const int32_t id = static_cast<int32_t>(words[1]);
    const uint32_t rows = words[2];
    std::memset(words, 0, 16);
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "GET_ROWS id %d is out of range: the source has %u rows", id,
                         rows);
  }
  return BP_OK;
}

namespace {

backend_ctx *ctx_of(void *backend) { return static_cast<backend_ctx *>(backend); }

void backend_free(void *backend) noexcept { delete ctx_of(backend); }

bp_buffer_type_ref backend_buffer_type(void *backend) noexcept {
  return bp_buffer_type_ref{&buffer_type_iface, &ctx_of(backend)->dev->buft_device};
}

// The queue of plugins::async_transfer_slots. Async transfers go through a
// staging buffer so the caller's memory is only touched now (set) or at
// synchronize (get), and the copy is ordered with the graphs recorded
// around it.
struct vk_queue {
  using backend = backend_ctx;
  using buffer = vk_buffer;
  static constexpr const char *memory = "this backend's Vulkan device";
  static bp_status alive(backend_ctx *be, bp_error *err) { return device_check(be->dev, err); }
  static vk_buffer *buffer_of(const bp_tensor *t) {
    return t && t->data ? static_cast<vk_buffer *>(t->buffer_ctx) : nullptr;
  }
  static bool reaches(const backend_ctx *be, const vk_buffer *b) { return b->dev == be->dev; }
  static bp_status write(backend_ctx *be, vk_buffer *dst, size_t at, const void *data, size_t size, bp_error *err) {
    vk_buffer *st = nullptr;
    if (bp_status s = buffer_create(be->dev, size, true, &st, err); s != BP_OK) return s;
    be->staging.push_back(st);
    std::memcpy(st->mapped, data, size);
    VkCommandBuffer cb;
    if (bp_status s = backend_begin(be, &cb, err); s != BP_OK) return s;
    VkBufferCopy region{0, at, size};
    vkCmdCopyBuffer(cb, st->buffer, dst->buffer, 1, &region);
    cmd_begin_barrier(cb);  // later work in this command buffer reads it
    return BP_OK;
  }
  static bp_status read(backend_ctx *be, vk_buffer *src, size_t at, void *data, size_t size, bp_error *err) {
    vk_buffer *st = nullptr;
    if (bp_status s = buffer_create(be->dev, size, true, &st, err); s != BP_OK) return s;
    be->staging.push_back(st);
    VkCommandBuffer cb;
    if (bp_status s = backend_begin(be, &cb, err); s != BP_OK) return s;
    cmd_begin_barrier(cb);  // after what was recorded before
    VkBufferCopy region{at, 0, size};
    vkCmdCopyBuffer(cb, src->buffer, st->buffer, 1, &region);
    be->reads.push_back(pending_read{st, data, size});
    return BP_OK;
  }
};

using async = plugins::async_transfer_slots<vk_queue>;

bp_status backend_synchronize(void *backend, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status { return backend_sync(ctx_of(backend), err); });
}

bp_status backend_plan_create(void *backend, const bp_graph_desc *graph, void **out_plan, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out_plan || !graph) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "graph_plan_create needs a graph");
    *out_plan = nullptr;
    graph_plan *plan = nullptr;
    bp_status st = graph_plan_create(ctx_of(backend), graph, &plan, err);
    *out_plan = plan;
    return st;
  });
}

void backend_plan_free(void *, void *plan) noexcept { graph_plan_destroy(static_cast<graph_plan *>(plan)); }

bp_status backend_plan_compute(void *, void *plan, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!plan) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "graph_plan_compute needs a plan");
    return graph_plan_run(static_cast<graph_plan *>(plan), err);
  });
}

bp_status backend_graph_compute(void *backend, const bp_graph_desc *graph, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (bp_status s = plugins::check_graph(backend, graph, err); s != BP_OK) return s;
    return graph_compute(ctx_of(backend), graph, err);
  });
}

int backend_supports_op(void *backend, const bp_tensor *op) noexcept {
  return plugin_guard_value(0, [&] {
    if (!op) return 0;
    if (bp_op_is_view(op->op)) return 1;
    backend_ctx *be = ctx_of(backend);
    return op_supported(be->dev, be->opt, op) ? 1 : 0;
  });
}

int backend_supports_buft(void *backend, bp_buffer_type_ref buft) noexcept {
  backend_ctx *be = ctx_of(backend);
  if (buft.iface != &buffer_type_iface) return 0;
  auto *t = static_cast<buffer_type_ctx *>(buft.ctx);
  return t && t->dev == be->dev ? 1 : 0;
}

// The plugin's parts of plugins::event_slots: timeline values of the
// device's queue.
struct vk_events {
  using backend = backend_ctx;
  using event = vk_event;
  static bp_status alive(backend_ctx *be, bp_error *err) { return device_check(be->dev, err); }
  static bp_status record(backend_ctx *be, vk_event *ev, bp_error *err) {
    if (bp_status st = backend_flush(be, err); st != BP_OK) return st;
    ev->value = be->last;
    return BP_OK;
  }
  // Same device: the event's work was submitted to this queue earlier, and
  // every command buffer starts with a full barrier, so later work here is
  // already ordered after it. Another device's event: wait on the host.
  static bp_status wait(backend_ctx *be, vk_event *ev, bp_error *err) {
    return ev->dev == be->dev ? BP_OK : device_wait(ev->dev, ev->value, err);
  }
  static bp_status synchronize(vk_event *ev, bp_error *err) { return device_wait(ev->dev, ev->value, err); }
};

using events = plugins::event_slots<vk_events>;

const bp_backend_i backend_iface = {
    sizeof(bp_backend_i),
    backend_free,
    backend_buffer_type,
    async::set_async,
    async::get_async,
    nullptr,  // copy_tensor_async: the host's copy path
    backend_synchronize,
    backend_plan_create,
    backend_plan_free,
    backend_plan_compute,
    backend_graph_compute,
    backend_supports_op,
    backend_supports_buft,
    nullptr,  // offload_op
    events::record,
    events::wait,
};

}  // namespace

bp_status event_create(device_state *dev, bp_event_ref *out, bp_error *err) {
  if (bp_status st = device_open(dev, err); st != BP_OK) return st;
  out->iface = &events::table;
  out->ctx = new vk_event{dev, 0};
  return BP_OK;
}

bp_status backend_create(device_state *dev, const backend_options &opt, bp_backend_ref *out, bp_error *err) {
  auto be = std::make_unique<backend_ctx>();
  be->dev = dev;
  be->opt = opt;
  if (!dev->has_16bit_storage) be->opt.f16 = false;
  if (be->opt.tile_cols == 0) be->opt.tile_cols = dev->tile_cols;
  if (be->opt.profile && !dev->props.limits.timestampComputeAndGraphics)
    return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "profile=true needs timestamp queries, which %s lacks",
                         dev->name.c_str());
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, nullptr,
                              VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, dev->queue_family};
  VkResult r = vkCreateCommandPool(dev->dev, &pci, nullptr, &be->pool);
  if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreateCommandPool", err);
  // Host-visible so synchronize can read a shader's report without a copy.
  if (bp_status st = buffer_create(dev, 256, true, &be->status, err); st != BP_OK) return st;
  std::memset(be->status->mapped, 0, 256);
  bp_host_logf(dev->plugin->host, BP_LOG_INFO,
               "backend on '%s' (f16 %s, fast paths %s, fusion %s, tile columns %u, mul_mat %s, mul_mv %s, "
               "attention %s)",
               dev->name.c_str(), be->opt.f16 ? "on" : "off", be->opt.fast_paths ? "on" : "off",
               be->opt.fuse ? "on" : "off", be->opt.tile_cols, kMulMatNames[static_cast<int>(be->opt.mul_mat)],
               kMulMvNames[static_cast<int>(be->opt.mul_mv)], kAttentionNames[static_cast<int>(be->opt.attention)]);
  out->iface = &backend_iface;
  out->ctx = be.release();
  return BP_OK;
}

}  // namespace bp::vk
