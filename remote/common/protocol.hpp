// protocol.hpp: the constants of the remote protocol (remote/proto/remote.proto)
// that both sides must agree on, and the op-table fingerprint Hello compares.
// Shared by plugins/remote (the client) and bp-serve (the server).
#pragma once

#include <backplane/tensor.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace bp::remote {

// Bumped on any incompatible change of remote.proto or of what a field means.
inline constexpr uint32_t k_protocol_version = 2;

// gRPC metadata keys (lower case, as HTTP/2 requires).
inline constexpr const char *k_session_key = "bp-session";  // hex session id, every call but Hello
inline constexpr const char *k_token_key = "bp-token";      // the shared secret, when the server has one

// Data moves in chunks of at most this many bytes by default (SetTensor,
// GetTensor); a GetTensor may ask for up to k_max_chunk_bytes.
inline constexpr size_t k_default_chunk_bytes = size_t{1} << 20;
inline constexpr size_t k_max_chunk_bytes = size_t{4} << 20;
// The largest gRPC message either side accepts: a maximal chunk plus room for
// the header and framing. Graph descriptions must fit in it too.
inline constexpr size_t k_max_message_bytes = k_max_chunk_bytes + (size_t{64} << 10);

namespace detail {
inline void fnv1a(uint64_t &h, const void *data, size_t n) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
}
inline void fnv1a_str(uint64_t &h, const char *s) {
  const std::string v(s ? s : "");
  fnv1a(h, v.c_str(), v.size() + 1);  // the NUL separates names
}
inline void fnv1a_u64(uint64_t &h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));  // byte order fixed: little end first
  fnv1a(h, b, sizeof b);
}
}  // namespace detail

// Fingerprint of what a graph description means on this build: the op
// names in enum order (so a renumbered or inserted op changes it), the type
// names and sizes, and the limits of bp_tensor. Two builds whose
// fingerprints differ must not exchange graphs. "fnv1a64:" + 16 hex digits.
// |op_name| spells an op: bp_op_name on the server (op_table_fingerprint in
// remote/server/service_core.hpp), the plugins' own table in the remote
// plugin, which links nothing of libbackplane (this header needs tensor.h
// only, so the plugin includes it too).
template <class OpName>
inline std::string op_table_fingerprint_with(OpName op_name) {
  uint64_t h = 0xcbf29ce484222325ull;
  detail::fnv1a_str(h, "backplane-remote-op-table");
  detail::fnv1a_u64(h, BP_OP_COUNT);
  for (int op = 0; op < BP_OP_COUNT; ++op) detail::fnv1a_str(h, op_name(static_cast<bp_op>(op)));
  detail::fnv1a_u64(h, BP_TYPE_COUNT);
  for (int t = 0; t < BP_TYPE_COUNT; ++t) {
    detail::fnv1a_str(h, bp_type_name(static_cast<bp_type>(t)));
    detail::fnv1a_u64(h, bp_type_size(static_cast<bp_type>(t)));
  }
  detail::fnv1a_u64(h, BP_MAX_DIMS);
  detail::fnv1a_u64(h, BP_MAX_SRC);
  detail::fnv1a_u64(h, BP_MAX_OP_PARAMS);
  detail::fnv1a_u64(h, BP_MAX_NAME);
  char out[32];
  std::snprintf(out, sizeof out, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace bp::remote
