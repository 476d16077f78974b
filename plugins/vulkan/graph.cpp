// graph.cpp: records a graph's nodes as dispatches into one command buffer.
// A pipeline barrier goes in only where a dispatch reads or overwrites bytes
// an earlier dispatch since the last barrier wrote, or writes bytes one of
// them read (the allocator reuses memory): independent nodes run without one.
// Graph plans record once into their own command buffer and replay it by
// submitting it again.
#include <algorithm>

#include "vulkan.hpp"

namespace bp::vk {
namespace {

bool overlaps(const std::vector<byte_range> &set, const byte_range &r) {
  for (const byte_range &s : set)
    if (s.buffer == r.buffer && s.begin < r.end && r.begin < s.end) return true;
  return false;
}

struct recorder {
  backend_ctx *be;
  VkCommandBuffer cb;
  std::vector<byte_range> written, read;  // since the last barrier
  VkPipeline bound = VK_NULL_HANDLE;
  uint32_t n_barriers = 0, n_dispatches = 0;
  VkQueryPool timestamps = VK_NULL_HANDLE;  // profile=true: one after each dispatch
};

void record(recorder &rec, const dispatch &d) {
  bool hazard = false;
  for (const byte_range &r : d.reads) hazard = hazard || overlaps(rec.written, r);
  for (const byte_range &w : d.writes) hazard = hazard || overlaps(rec.written, w) || overlaps(rec.read, w);
  if (hazard) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(rec.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                         0, nullptr, 0, nullptr);
    rec.written.clear();
    rec.read.clear();
    ++rec.n_barriers;
  }
  rec.read.insert(rec.read.end(), d.reads.begin(), d.reads.end());
  rec.written.insert(rec.written.end(), d.writes.begin(), d.writes.end());

  device_state *dev = rec.be->dev;
  const int li = static_cast<int>(d.layout);
  if (d.pipeline != rec.bound) {
    vkCmdBindPipeline(rec.cb, VK_PIPELINE_BIND_POINT_COMPUTE, d.pipeline);
    rec.bound = d.pipeline;
  }
  // Unused bindings point at the backend's small status buffer: every
  // binding a shader declares must hold a valid descriptor.
  vk_buffer *dummy = rec.be->status;
  VkDescriptorBufferInfo infos[kBindings];
  VkBufferView views[kBindings];
  VkWriteDescriptorSet writes[kBindings];
  for (uint32_t i = 0; i < kBindings; ++i) {
    const binding &b = d.bind[i];
    const bool texel = d.layout == layout_kind::texel && i < 3;
    writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, nullptr, VK_NULL_HANDLE, i,      0, 1,
                                     VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,      nullptr, nullptr,        nullptr};
    if (texel) {
      views[i] = b.view ? b.view : dummy->view_f32;
      writes[i].descriptorType =
          i < 2 ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
      writes[i].pTexelBufferView = &views[i];
    } else {
      infos[i] = b.buf ? VkDescriptorBufferInfo{b.buf->buffer, b.offset, b.range}
                       : VkDescriptorBufferInfo{dummy->buffer, 0, VK_WHOLE_SIZE};
      writes[i].pBufferInfo = &infos[i];
    }
  }
  dev->push_descriptor(rec.cb, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipes.layout[li], 0, kBindings, writes);
  vkCmdPushConstants(rec.cb, dev->pipes.layout[li], VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push_consts), &d.pc);
  vkCmdDispatch(rec.cb, d.groups[0], d.groups[1], d.groups[2]);
  ++rec.n_dispatches;
  if (rec.timestamps) {
    // Profiling serialises the dispatches so each interval is one dispatch's.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(rec.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                         0, nullptr, 0, nullptr);
    vkCmdWriteTimestamp(rec.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, rec.timestamps, rec.n_dispatches);
  }
}

// profile=true: a query pool of one timestamp before and one after each of
// |n| dispatches, reset in |cb|.
bp_status profile_begin(backend_ctx *be, VkCommandBuffer cb, uint32_t n, VkQueryPool *out, bp_error *err) {
  VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, nullptr, 0, VK_QUERY_TYPE_TIMESTAMP, n + 1, 0};
  VkResult r = vkCreateQueryPool(be->dev->dev, &qi, nullptr, out);
  if (r != VK_SUCCESS) return device_fail(be->dev, r, "vkCreateQueryPool", err);
  vkCmdResetQueryPool(cb, *out, 0, n + 1);
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, *out, 0);
  return BP_OK;
}

// Waits for the graph, adds each dispatch's time to the backend's profile.
bp_status profile_end(backend_ctx *be, VkQueryPool pool, const std::vector<dispatch> &ds, bp_error *err) {
  bp_status st = backend_sync(be, err);
  std::vector<uint64_t> ticks(ds.size() + 1);
  if (st == BP_OK) {
    VkResult r = vkGetQueryPoolResults(be->dev->dev, pool, 0, static_cast<uint32_t>(ticks.size()),
                                       ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS) st = device_fail(be->dev, r, "vkGetQueryPoolResults", err);
  }
  vkDestroyQueryPool(be->dev->dev, pool, nullptr);
  if (st != BP_OK) return st;
  const double ms_per_tick = be->dev->props.limits.timestampPeriod * 1e-6;
  for (size_t i = 0; i < ds.size(); ++i) {
    profile_entry &e = be->profile[std::string(ds[i].op ? ds[i].op : "?") + " " + ds[i].variant];
    e.ms += static_cast<double>(ticks[i + 1] - ticks[i]) * ms_per_tick;
    ++e.count;
  }
  return BP_OK;
}

// Plans every node (skipping views) into |out|.
bp_status plan_graph(backend_ctx *be, const bp_graph_desc *graph, std::vector<dispatch> &out, bp_error *err) {
  // backend_graph_compute checked the graph (plugins::check_graph).
  for (uint32_t i = 0; i < graph->n_nodes;) {
    const bp_tensor *node = graph->nodes[i];
    if (bp_op_is_view(node->op) || bp_tensor_nelements(node) == 0) {
      ++i;
      continue;
    }
    const bp_tensor *next = i + 1 < graph->n_nodes ? graph->nodes[i + 1] : nullptr;
    uint32_t consumed = 1;
    if (bp_status st = op_plan(be, node, next, out, &consumed, err); st != BP_OK) return st;
    i += consumed;
  }
  for (dispatch &d : out) {
    bp_status st = pipeline_get(be->dev, d.variant, d.layout, d.spec, d.n_spec, &d.pipeline, err);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

}  // namespace

bp_status graph_compute(backend_ctx *be, const bp_graph_desc *graph, bp_error *err) {
  if (bp_status st = device_check(be->dev, err); st != BP_OK) return st;
  // Work recorded before (async writes of the inputs) is submitted first:
  // the recorder's hazard tracking starts from an empty set.
  if (bp_status st = backend_flush(be, err); st != BP_OK) return st;
  std::vector<dispatch> ds;
  if (bp_status st = plan_graph(be, graph, ds, err); st != BP_OK) return st;
  if (ds.empty()) return BP_OK;
  VkCommandBuffer cb;
  if (bp_status st = backend_begin(be, &cb, err); st != BP_OK) return st;
  recorder rec{be, cb, {}, {}, VK_NULL_HANDLE, 0, 0, VK_NULL_HANDLE};
  // Asked once per graph: untraced, the recording is the same as before.
  const bp_host_api *host = be->dev->plugin->host;
  const bool tracing =
      !be->opt.profile && be->dev->props.limits.timestampComputeAndGraphics && bp_host_trace_enabled(host);
  if (be->opt.profile || tracing) {
    if (bp_status st = profile_begin(be, cb, static_cast<uint32_t>(ds.size()), &rec.timestamps, err); st != BP_OK)
      return st;
  }
  for (const dispatch &d : ds) record(rec, d);
  bp_host_logf(host, BP_LOG_DEBUG, "graph of %u nodes: %u dispatches, %u barriers", graph->n_nodes, rec.n_dispatches,
               rec.n_barriers);
  if (be->opt.profile) return profile_end(be, rec.timestamps, ds, err);
  if (tracing) {
    traced_graph tg;
    tg.pool = rec.timestamps;
    for (const dispatch &d : ds) {
      tg.node.push_back(d.node);
      tg.fused.push_back(d.fused);
    }
    tg.submitted_ns = bp_host_trace_now(host);
    be->traced.push_back(std::move(tg));
  }
  return backend_flush(be, err);
}

bp_status graph_plan_create(backend_ctx *be, const bp_graph_desc *graph, graph_plan **out, bp_error *err) {
  *out = nullptr;
  if (bp_status st = device_check(be->dev, err); st != BP_OK) return st;
  // A replayed command buffer has no per-run query results to read back.
  if (be->opt.profile)
    return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "no graph plans with profile=true (graphs run one by one)");
  auto plan = std::make_unique<graph_plan>();
  plan->be = be;
  plan->nodes.assign(graph->nodes, graph->nodes + graph->n_nodes);
  std::vector<dispatch> ds;
  bp_status st = plan_graph(be, graph, ds, err);
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, be->pool,
                                 VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  if (st == BP_OK) {
    VkResult r = vkAllocateCommandBuffers(be->dev->dev, &ai, &plan->cb);
    if (r != VK_SUCCESS) st = device_fail(be->dev, r, "vkAllocateCommandBuffers", err);
  }
  if (st != BP_OK) return st;
  // Simultaneous use: a replay may be submitted while the previous one runs;
  // the leading barrier orders them.
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr,
                              VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT, nullptr};
  vkBeginCommandBuffer(plan->cb, &bi);
  cmd_begin_barrier(plan->cb);
  recorder rec{be, plan->cb, {}, {}, VK_NULL_HANDLE, 0, 0, VK_NULL_HANDLE};
  for (const dispatch &d : ds) record(rec, d);
  cmd_end_barrier(plan->cb);
  VkResult r = vkEndCommandBuffer(plan->cb);
  if (r != VK_SUCCESS) {
    graph_plan_destroy(plan.release());
    return device_fail(be->dev, r, "vkEndCommandBuffer", err);
  }
  plan->n_dispatches = rec.n_dispatches;
  plan->n_barriers = rec.n_barriers;
  bp_host_logf(be->dev->plugin->host, BP_LOG_DEBUG, "plan of %u nodes: %u dispatches, %u barriers", graph->n_nodes,
               rec.n_dispatches, rec.n_barriers);
  *out = plan.release();
  return BP_OK;
}

void graph_plan_destroy(graph_plan *plan) {
  if (!plan) return;
  device_state *dev = plan->be->dev;
  device_wait(dev, plan->value, nullptr);
  if (plan->cb) vkFreeCommandBuffers(dev->dev, plan->be->pool, 1, &plan->cb);
  delete plan;
}

bp_status graph_plan_run(graph_plan *plan, bp_error *err) {
  backend_ctx *be = plan->be;
  if (bp_host_trace_enabled(be->dev->plugin->host) && be->dev->props.limits.timestampComputeAndGraphics) {
    // The recorded command buffer has no timestamps: while a trace records,
    // the replay is recorded again with them (the nodes are the plan's).
    bp_graph_desc desc{sizeof desc, static_cast<uint32_t>(plan->nodes.size()), plan->nodes.data()};
    return graph_compute(be, &desc, err);
  }
  // Work queued before the replay (async writes of its inputs) goes first.
  if (bp_status st = backend_flush(be, err); st != BP_OK) return st;
  uint64_t v = 0;
  if (bp_status st = device_submit(be->dev, plan->cb, &v, err); st != BP_OK) return st;
  plan->value = v;
  be->last = v;
  return BP_OK;
}

}  // namespace bp::vk
