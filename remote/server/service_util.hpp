// service_util.hpp: small helpers the handler files of service_core share:
// range checks and the lookups of a session's objects with their NOT_FOUND
// messages.
#pragma once

#include <cstdint>
#include <string>

#include "session.hpp"
#include "status.hpp"

namespace bp::remote::server {

// True when [offset, offset + size) lies inside |limit| bytes (overflow-safe).
inline bool inside(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

inline std::string range_text(uint64_t offset, uint64_t size, uint64_t limit) {
  return "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") are outside the buffer of " +
         std::to_string(limit) + " bytes";
}

inline remote_buffer *find_buffer(session &s, uint64_t h) {
  auto it = s.buffers.find(h);
  return it == s.buffers.end() ? nullptr : it->second.get();
}
inline remote_backend *find_backend(session &s, uint64_t h) {
  auto it = s.backends.find(h);
  return it == s.backends.end() ? nullptr : it->second.get();
}

inline grpc::Status no_buffer(uint64_t h) {
  return not_found("buffer handle " + std::to_string(h) + " is unknown in this session (freed, or from another)");
}
inline grpc::Status no_backend(uint64_t h) {
  return not_found("backend handle " + std::to_string(h) + " is unknown in this session (freed, or from another)");
}
inline grpc::Status no_device(uint32_t device, size_t count) {
  return invalid("device " + std::to_string(device) + ": this server has " + std::to_string(count) + " devices");
}
inline grpc::Status no_randomness() {
  return {grpc::StatusCode::INTERNAL, "the kernel gave no random bytes for a handle (getrandom failed)"};
}

}  // namespace bp::remote::server
