// graph_cost.hpp: the server memory a registered graph holds, which
// --max-graph-memory is charged with. Counted from what the graph really
// is once rebuilt (its context's tensors, the graph's node and leaf lists
// and their member set, the node index the server keeps for node times,
// the plan), at the size each of those takes in the C++ library's
// containers and in glibc's malloc chunks, so a session's graphs never hold
// more than its quota. What is not a graph's is not here: the request
// message while it is parsed and rebuilt (gRPC's, gone when the call
// returns; at most k_max_message_bytes on the wire), which docs/remote.md
// states as the allowance on top of the quota.
#pragma once

#include <cstdint>

#include "session.hpp"

namespace bp::remote::server {

// The heap bytes glibc's malloc takes for a request of |n| bytes on 64-bit
// Linux: n plus its 8-byte header, rounded up to 16, at least 32.
constexpr uint64_t malloc_chunk(uint64_t n) { return n + 8 <= 32 ? 32 : (n + 8 + 15) / 16 * 16; }

// Per tensor of a context (a std::deque<bp_tensor>: 512-byte blocks, or
// one tensor per block when a tensor is larger, plus its map's pointer).
uint64_t context_bytes_per_tensor();
// Per tensor in a graph's node or leaf list: the list's slot (vectors grow
// by doubling: up to two), its entry in the member set (a hash node and up
// to two bucket pointers).
inline constexpr uint64_t k_graph_bytes_per_member = 2 * 8 + malloc_chunk(2 * 8) + 2 * 8;
// Per entry of remote_graph::node_index (a hash node of a pointer and an
// index, and up to two bucket pointers).
inline constexpr uint64_t k_index_bytes_per_node = malloc_chunk(8 + 16) + 2 * 8;
// Per node of a plan, for the backends that make one (vulkan): the core's
// and the plugin's copies of the node list and the plugin's recorded work.
// A plugin does not report what its plan holds, so this one figure is an
// estimate, not a count.
inline constexpr uint64_t k_plan_bytes_per_node = 512;

// The least a description of |tensors| tensors and |nodes| node entries
// can hold once rebuilt: one context tensor per description tensor and one
// index entry per node. Checked before anything is built, so a graph that
// cannot fit costs nothing.
uint64_t graph_cost_floor(uint64_t tensors, uint64_t nodes);

// What |g|, rebuilt and planned, holds: the charge its session carries
// until the graph is freed.
uint64_t graph_cost(const remote_graph &g);

}  // namespace bp::remote::server
