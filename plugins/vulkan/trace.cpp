// trace.cpp: node times from timestamp queries, reported through the host
// table's tracing slots (docs/performance.md, "Tracing").
//
// While a trace records, graph_compute writes a timestamp before the first
// dispatch and one after each (behind a barrier, as profile=true does, so
// each interval is one dispatch's: independent dispatches no longer
// overlap), and keeps the query pool until synchronize. A replayed graph
// plan is recorded afresh with timestamps while tracing (graph.cpp).
//
// Clocks: the device's ticks (timestampPeriod ns each) are placed on the
// host's trace clock at one offset per graph, the earliest the two bounds
// allow: the first timestamp was written after the host submitted, and the
// last before synchronize's wait returned. (VK_EXT_calibrated_timestamps
// would give the offset directly; not every driver has it.)
#include <algorithm>
#include <cstdint>
#include <vector>

#include "vulkan.hpp"

namespace bp::vk {

void trace_harvest(backend_ctx *be, uint64_t finished_ns) {
  const bp_host_api *host = be->dev->plugin->host;
  const bool report = !be->closing && bp_host_trace_enabled(host);
  const double ns_per_tick = be->dev->props.limits.timestampPeriod;
  for (traced_graph &tg : be->traced) {
    const size_t n = tg.node.size();
    std::vector<uint64_t> ticks(n + 1);
    const bool ok = report && vkGetQueryPoolResults(be->dev->dev, tg.pool, 0, static_cast<uint32_t>(n + 1),
                                                    ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS;
    vkDestroyQueryPool(be->dev->dev, tg.pool, nullptr);
    if (!ok) continue;
    // Ticks since the first timestamp (wrapping counters subtract fine).
    std::vector<int64_t> at(n + 1);
    for (size_t i = 0; i <= n; ++i)
      at[i] = static_cast<int64_t>(static_cast<double>(ticks[i] - ticks[0]) * ns_per_tick);
    const int64_t lower = static_cast<int64_t>(tg.submitted_ns);
    const int64_t upper = static_cast<int64_t>(finished_ns) - at[n];
    const int64_t origin = std::min(lower, upper);  // host time of the first timestamp
    for (size_t i = 0; i < n;) {
      // A node's dispatches are consecutive: one span from the first one's
      // start to the last one's end.
      const bp_tensor *node = tg.node[i], *fused = tg.fused[i];
      const size_t first = i;
      while (i < n && tg.node[i] == node) ++i;
      const uint64_t b = std::max(static_cast<uint64_t>(origin + at[first]), be->last_traced_end);
      const uint64_t e = std::max(static_cast<uint64_t>(origin + at[i]), b);
      be->last_traced_end = e;
      if (node) bp_host_trace_node(host, be, node, BP_TRACE_WHOLE_NODE, b, e);
      // A node fused into this one ran inside its dispatches: it appears as
      // a zero-length span at their end, so every node is in the trace once
      // and the node times still add up.
      if (fused) bp_host_trace_node(host, be, fused, BP_TRACE_WHOLE_NODE, e, e);
    }
  }
  be->traced.clear();
}

}  // namespace bp::vk
