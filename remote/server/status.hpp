// status.hpp: gRPC statuses from Backplane ones, and the few helpers every
// handler uses to refuse input.
#pragma once

#include <backplane/backplane.h>
#include <grpcpp/support/status.h>

#include <string>

namespace bp::remote::server {

// The gRPC code for |s| (remote.proto's table): DEVICE_LOST and UNAVAILABLE
// are UNAVAILABLE, out-of-memory is RESOURCE_EXHAUSTED, a plugin failure
// INTERNAL. The message starts with the Backplane status name
// ("DEVICE_LOST: ...") so the client can tell them apart.
grpc::Status from_bp(bp_status s, const std::string &message);
// from_bp with this thread's bp_last_status / bp_last_error, |context|
// first ("node 3 (ADD): ...").
grpc::Status from_last_error(const std::string &context);

inline grpc::Status invalid(const std::string &m) { return {grpc::StatusCode::INVALID_ARGUMENT, m}; }
inline grpc::Status not_found(const std::string &m) { return {grpc::StatusCode::NOT_FOUND, m}; }
inline grpc::Status exhausted(const std::string &m) { return {grpc::StatusCode::RESOURCE_EXHAUSTED, m}; }

}  // namespace bp::remote::server
