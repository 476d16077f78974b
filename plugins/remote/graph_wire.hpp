// graph_wire.hpp: graphs and nodes by value for the wire (remote.proto's
// TensorDesc): every tensor a node needs (its sources, their view sources,
// down to the leaves), each before the tensors that use it, with the
// server's buffer handle and offset of its memory.
#ifndef BP_PLUGIN_REMOTE_GRAPH_WIRE_HPP_
#define BP_PLUGIN_REMOTE_GRAPH_WIRE_HPP_

#include <string>

#include "remote.hpp"

namespace bp::remote_plugin {

// Fills |out| (tensors and node indices) from |graph|. Every tensor with
// memory must live in a buffer of session |s|: INVALID_ARGUMENT naming the
// tensor otherwise.
bp_status describe_graph(const bp_graph_desc *graph, const session *s, pb::GraphRegisterRequest *out, bp_error *err);

// The tensors SupportsOp needs for |node| (its sources first, the node
// last), without memory or names: the same description for the same node
// shape whichever graph it is in, so it is the cache key too.
void describe_node(const bp_tensor *node, pb::SupportsOpRequest *out);

// 64-bit FNV-1a of |bytes| (the graph cache's first key).
uint64_t hash_bytes(const std::string &bytes);

}  // namespace bp::remote_plugin

#endif  // BP_PLUGIN_REMOTE_GRAPH_WIRE_HPP_
