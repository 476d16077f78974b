// graph_cost.cpp: the server memory of a registered graph (graph_cost.hpp).
#include "graph_cost.hpp"

namespace bp::remote::server {

uint64_t context_bytes_per_tensor() {
  // libstdc++'s deque keeps 512 / sizeof(T) elements per block (one when T
  // is larger) and a map of block pointers that grows by doubling.
  const uint64_t per_block = sizeof(bp_tensor) < 512 ? 512 / sizeof(bp_tensor) : 1;
  return (malloc_chunk(per_block * sizeof(bp_tensor)) + 2 * 8 + per_block - 1) / per_block;
}

uint64_t graph_cost_floor(uint64_t tensors, uint64_t nodes) {
  return tensors * context_bytes_per_tensor() + nodes * k_index_bytes_per_node;
}

uint64_t graph_cost(const remote_graph &g) {
  uint64_t bytes = malloc_chunk(sizeof(remote_graph));
  // Everything the rebuild made, the extra tensors of strided views
  // included.
  bytes += bp_context_tensor_count(g.ctx) * context_bytes_per_tensor();
  const uint64_t members = bp_graph_node_count(g.graph) + bp_graph_leaf_count(g.graph);
  bytes += members * k_graph_bytes_per_member;
  bytes += g.node_index.size() * k_index_bytes_per_node;
  // The buffer handles it uses: one tree node each.
  bytes += g.buffers.size() * malloc_chunk(32 + sizeof(uint64_t));
  if (g.plan != nullptr) bytes += bp_graph_node_count(g.graph) * k_plan_bytes_per_node;
  return bytes;
}

}  // namespace bp::remote::server
