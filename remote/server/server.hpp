// server.hpp: bp-serve's gRPC server: listening address, credentials (TLS or
// plaintext), message limits, keepalive, and a clean stop. tools/bp-serve
// is the command line around it.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <memory>
#include <string>

#include "grpc_service.hpp"
#include "service_core.hpp"

namespace bp::remote::server {

// Server threads kept beyond the sessions' shares (Hello, refused calls).
inline constexpr size_t k_thread_reserve = 16;

struct server_config {
  std::string listen;        // HOST:PORT ([v6]:PORT); port 0 picks a free one
  std::string tls_cert_pem;  // with tls_key_pem: TLS; both empty: plaintext
  std::string tls_key_pem;
  std::string tls_client_ca_pem;  // when set, clients must present a certificate it signed
  std::chrono::milliseconds heartbeat{5000};
  // SetTensor and GetTensor streams that move no data for this long are
  // ended with DEADLINE_EXCEEDED (0: never).
  std::chrono::milliseconds stream_idle{30000};
  service_options service;
};

// True when |host| (a name or address, IPv6 bracketed or not) resolves, and
// every address it resolves to is loopback (127.0.0.0/8, ::1). A name that
// does not resolve is not loopback.
bool is_loopback_host(const std::string &host);
// Splits HOST:PORT; false when it is not of that form.
bool split_host_port(const std::string &listen, std::string *host, int *port);

class server {
 public:
  explicit server(server_config cfg);
  ~server();
  // Binds and starts serving. False with |error| set when the address cannot
  // be bound or the credentials are unusable.
  bool start(std::string *error);
  // The address actually bound ("127.0.0.1:41234").
  const std::string &address() const { return bound_; }
  // Closes sessions without a lifeline |grace| after Hello.
  size_t reap(std::chrono::steady_clock::duration grace) { return core_.reap(grace); }
  // Ends lifelines, stops accepting, cancels calls still running after
  // |deadline| (clients see UNAVAILABLE), frees every session.
  void stop(std::chrono::milliseconds deadline);
  service_core &core() { return core_; }

 private:
  server_config cfg_;
  service_core core_;
  grpc_service service_;
  std::unique_ptr<grpc::Server> server_;
  std::string bound_;
};

}  // namespace bp::remote::server
