// connection_id.cpp: a random id per transport connection, kept in the
// connection's auth context (connection_id.hpp).
#include "connection_id.hpp"

#include <grpc/grpc_security.h>

#include <mutex>

#include "secure_random.hpp"

namespace bp::remote::server {

std::string connection_id(grpc::ServerContext *c) {
  // gRPC gives every call on a connection the auth context made by that
  // connection's handshake (plaintext connections get one too, "insecure"),
  // so a property added to it is seen by every later call on the same
  // connection and by no other connection.
  grpc_auth_context *auth = grpc_call_auth_context(c->c_call());
  if (auth == nullptr) return {};
  // Adding a property is not thread-safe, and two first calls of one
  // connection may race: one lock makes "find, else add" atomic.
  static std::mutex mu;
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu);
    grpc_auth_property_iterator it = grpc_auth_context_find_properties_by_name(auth, k_connection_property);
    if (const grpc_auth_property *p = grpc_auth_property_iterator_next(&it)) {
      id.assign(p->value, p->value_length);
    } else {
      id = secure_random_hex128();
      if (!id.empty()) grpc_auth_context_add_cstring_property(auth, k_connection_property, id.c_str());
    }
  }
  grpc_auth_context_release(auth);
  return id;
}

}  // namespace bp::remote::server
