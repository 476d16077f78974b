// server.cpp: building and stopping the gRPC server (server.hpp).
#include "server.hpp"

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "protocol.hpp"

namespace bp::remote::server {

bool is_loopback_host(const std::string &host) {
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  if (name.empty()) return false;
  // Resolved, not matched as text: "127.attacker.example" is a DNS name
  // that can point anywhere.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *list = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &list) != 0 || list == nullptr) return false;
  bool all_loopback = true;
  for (const addrinfo *a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto *in = reinterpret_cast<const sockaddr_in *>(a->ai_addr);
      all_loopback = all_loopback && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(a->ai_addr);
      all_loopback = all_loopback && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      all_loopback = false;
    }
  }
  freeaddrinfo(list);
  return all_loopback;
}

bool split_host_port(const std::string &listen, std::string *host, int *port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) return false;
  const std::string p = listen.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  const int v = std::stoi(p);
  if (v > 65535) return false;
  std::string h = listen.substr(0, colon);
  // An IPv6 address must be bracketed, so its own colons are not the port's.
  if (h.find(':') != std::string::npos && !(h.front() == '[' && h.back() == ']')) return false;
  *host = h;
  *port = v;
  return true;
}

server::server(server_config cfg)
    : cfg_(std::move(cfg)), core_(cfg_.service), service_(core_, cfg_.heartbeat, cfg_.stream_idle) {}

server::~server() { stop(std::chrono::milliseconds(0)); }

bool server::start(std::string *error) {
  std::string host;
  int port = 0;
  if (!split_host_port(cfg_.listen, &host, &port)) {
    *error = "--listen '" + cfg_.listen + "' is not HOST:PORT (an IPv6 host in brackets: [::1]:7000)";
    return false;
  }
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (!cfg_.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl(cfg_.tls_client_ca_pem.empty()
                                              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = cfg_.tls_client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({cfg_.tls_key_pem, cfg_.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  grpc::ServerBuilder b;
  int bound_port = 0;
  b.AddListeningPort(cfg_.listen, creds, &bound_port);
  b.RegisterService(&service_);
  // Explicit limits: one chunk plus framing each way.
  b.SetMaxReceiveMessageSize(static_cast<int>(k_max_message_bytes));
  b.SetMaxSendMessageSize(static_cast<int>(k_max_message_bytes));
  // Silent peers (a host gone without closing) are found by pings; clients
  // may ping every 10 s even without calls (their lifeline idles).
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A session holds a thread for its lifeline and one per call in flight,
  // at most max_session_calls: the pool has room for every session's share
  // plus a reserve for Hello and refusals, so no session can take another's.
  if (cfg_.service.max_sessions != 0 && cfg_.service.max_session_calls != 0) {
    grpc::ResourceQuota quota("bp-serve");
    quota.SetMaxThreads(
        static_cast<int>(cfg_.service.max_sessions * (cfg_.service.max_session_calls + 1) + k_thread_reserve));
    b.SetResourceQuota(quota);
  }
  server_ = b.BuildAndStart();
  if (!server_ || bound_port == 0) {
    server_.reset();
    *error = "cannot listen on " + cfg_.listen +
             " (address in use, not local, or the TLS key and certificate do "
             "not match)";
    return false;
  }
  bound_ = host + ":" + std::to_string(bound_port);
  return true;
}

void server::stop(std::chrono::milliseconds deadline) {
  if (!server_) return;
  core_.begin_shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  server_.reset();
  core_.shutdown();
}

}  // namespace bp::remote::server
