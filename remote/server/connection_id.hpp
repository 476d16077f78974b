// connection_id.hpp: which transport connection a call came on. A session
// belongs to the connection that opened it, and the peer address is no name
// for one: a client whose connection was reset can be followed by another
// from the same address and port, and the two would read alike. Each
// connection is given a random 128-bit id instead, kept in the connection's
// own gRPC auth context, so it dies with the connection and nothing a
// client sends can name it.
#pragma once

#include <grpcpp/server_context.h>

#include <string>

namespace bp::remote::server {

// The auth-context property that holds the id (not a name the TLS
// handshake uses, so a certificate cannot carry it).
inline constexpr const char *k_connection_property = "bp_connection_id";

// The id of the connection |c|'s call came on: 32 hex digits, made on the
// connection's first call and the same for every later call on it. Empty
// when there is no auth context or no randomness; the caller then refuses
// the call rather than bind a session to nothing. Thread-safe.
std::string connection_id(grpc::ServerContext *c);

}  // namespace bp::remote::server
