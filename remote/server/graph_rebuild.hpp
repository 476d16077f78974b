// graph_rebuild.hpp: a graph description from the wire (TensorDesc list)
// rebuilt in a server-side context through the core's own builders
// (bp_tensor_new, the view calls, bp_op_new), so the op table's shape, type
// and parameter rules decide what is valid, exactly as for a local caller.
// Every refusal is INVALID_ARGUMENT naming the node index and op (NOT_FOUND
// for a buffer handle this session does not have); nothing here trusts an
// index, a size or an offset from the wire before checking it.
#pragma once

#include <backplane/backplane.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <set>
#include <vector>

#include "remote.pb.h"
#include "session.hpp"

namespace bp::remote::server {

namespace pb = ::backplane::remote::v1;

// The most tensors one description may hold.
inline constexpr int k_max_graph_tensors = 1 << 16;

struct rebuilt_graph {
  bp_context *ctx = nullptr;         // owns the tensors; the caller frees it
  std::vector<bp_tensor *> tensors;  // index i is the description's tensor i
  std::set<uint64_t> buffers;        // buffer handles the tensors were placed in
};

// Rebuilds |descs| into out->ctx. With |place|, every tensor that owns
// memory (leaves and op results, not views) is placed at its (buffer,
// offset) of |s| after a range check; without it (SupportsOp) placement is
// ignored. The caller holds s.mu. On failure out->ctx is freed and NULL.
grpc::Status rebuild_tensors(session &s, const google::protobuf::RepeatedPtrField<pb::TensorDesc> &descs, bool place,
                             rebuilt_graph *out);

}  // namespace bp::remote::server
