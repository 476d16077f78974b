// grpc_service.cpp: the gRPC methods over service_core (grpc_service.hpp).
#include "grpc_service.hpp"

#include <algorithm>
#include <string>

#include "connection_id.hpp"
#include "protocol.hpp"

namespace bp::remote::server {
namespace {

// The metadata values of one call, copied out of gRPC's string_refs, and
// the connection it came on.
struct meta_values {
  std::string token, session, peer;
  bool connection_known = false;  // false: no id could be made, and Hello is refused
  call_meta meta;
  explicit meta_values(grpc::ServerContext *c) {
    const auto &md = c->client_metadata();
    if (auto it = md.find(k_token_key); it != md.end()) {
      token.assign(it->second.data(), it->second.size());
      meta.token = &token;
      meta.token_repeated = md.count(k_token_key) > 1;
    }
    if (auto it = md.find(k_session_key); it != md.end()) {
      session.assign(it->second.data(), it->second.size());
      meta.session = &session;
    }
    // What a session is bound to: the transport connection's own id
    // (connection_id.hpp), not the peer address, which a new connection
    // from the same address and port reproduces. The address stays in the
    // string for the log; with TLS client certificates the identity is part
    // of it too.
    const std::string conn = connection_id(c);
    connection_known = !conn.empty();
    peer = c->peer() + " #" + conn;
    if (auto auth = c->auth_context(); auth && auth->IsPeerAuthenticated()) {
      for (const auto &id : auth->GetPeerIdentity()) peer += "|" + std::string(id.data(), id.size());
    }
    meta.peer = &peer;
    meta.cancelled = [c] { return c->IsCancelled() || c->deadline() < std::chrono::system_clock::now(); };
  }
};

grpc::Status idle_status(const char *what, std::chrono::milliseconds idle) {
  return {grpc::StatusCode::DEADLINE_EXCEEDED, std::string(what) + ": the stream moved no data for " +
                                                   std::to_string(idle.count()) +
                                                   " ms (bp-serve --stream-idle-timeout): it was ended"};
}

}  // namespace

grpc::Status grpc_service::Hello(grpc::ServerContext *c, const pb::HelloRequest *q, pb::HelloReply *r) {
  meta_values mv(c);
  // A session needs a connection to belong to (sessions opened without one
  // would all share the same empty id).
  if (!mv.connection_known) {
    return {grpc::StatusCode::UNAVAILABLE, "Hello: bp-serve could not name this connection (no random bytes)"};
  }
  return core_.hello(mv.meta, *q, r);
}

grpc::Status grpc_service::Lifeline(grpc::ServerContext *c, const pb::LifelineRequest *,
                                    grpc::ServerWriter<pb::Heartbeat> *w) {
  std::shared_ptr<session> s;
  if (grpc::Status st = core_.lifeline_attach(meta_values(c).meta, &s); !st.ok()) return st;
  // Heartbeats until the client cancels or goes away (a write fails), the
  // session is closed, or the server stops; then everything it owns is
  // freed. A cancel is noticed within a slice, however long the heartbeat.
  const auto slice = std::min(heartbeat_, std::chrono::milliseconds(250));
  pb::Heartbeat hb;
  uint64_t seq = 0;
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    if (c->IsCancelled()) break;
    if (std::chrono::steady_clock::now() >= next) {
      hb.set_sequence(seq++);
      if (!w->Write(hb)) break;
      next = std::chrono::steady_clock::now() + heartbeat_;
    }
    if (!core_.lifeline_wait(*s, slice)) break;
  }
  core_.lifeline_end(s);
  if (core_.stopping()) return {grpc::StatusCode::UNAVAILABLE, "bp-serve is shutting down"};
  return grpc::Status::OK;
}

grpc::Status grpc_service::Goodbye(grpc::ServerContext *c, const pb::GoodbyeRequest *, pb::Empty *) {
  return core_.goodbye(meta_values(c).meta);
}
grpc::Status grpc_service::DeviceMemory(grpc::ServerContext *c, const pb::DeviceRef *q, pb::DeviceMemoryReply *r) {
  return core_.device_memory(meta_values(c).meta, *q, r);
}
grpc::Status grpc_service::BackendOpen(grpc::ServerContext *c, const pb::BackendOpenRequest *q, pb::Handle *r) {
  return core_.backend_open(meta_values(c).meta, *q, r);
}
grpc::Status grpc_service::BackendFree(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *) {
  return core_.backend_free(meta_values(c).meta, *q);
}
grpc::Status grpc_service::BackendSynchronize(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *) {
  return core_.backend_synchronize(meta_values(c).meta, *q);
}
grpc::Status grpc_service::SupportsOp(grpc::ServerContext *c, const pb::SupportsOpRequest *q, pb::SupportsOpReply *r) {
  return core_.supports_op(meta_values(c).meta, *q, r);
}
grpc::Status grpc_service::BufferAlloc(grpc::ServerContext *c, const pb::BufferAllocRequest *q,
                                       pb::BufferAllocReply *r) {
  return core_.buffer_alloc(meta_values(c).meta, *q, r);
}
grpc::Status grpc_service::BufferFree(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *) {
  return core_.buffer_free(meta_values(c).meta, *q);
}
grpc::Status grpc_service::BufferClear(grpc::ServerContext *c, const pb::BufferClearRequest *q, pb::Empty *) {
  return core_.buffer_clear(meta_values(c).meta, *q);
}
grpc::Status grpc_service::BufferMemset(grpc::ServerContext *c, const pb::BufferMemsetRequest *q, pb::Empty *) {
  return core_.buffer_memset(meta_values(c).meta, *q);
}

grpc::Status grpc_service::SetTensor(grpc::ServerContext *c, grpc::ServerReader<pb::SetTensorChunk> *rd, pb::Empty *) {
  set_stream st;
  // The token and session are checked before the first message is read.
  meta_values mv(c);
  if (grpc::Status s = core_.set_tensor_begin(mv.meta, &st); !s.ok()) return s;
  stream_watchdog::watch watch(watchdog_, c);
  pb::SetTensorChunk msg;
  while (rd->Read(&msg)) {
    watch.touch();
    if (grpc::Status s = core_.set_tensor_chunk(&st, msg); !s.ok()) return s;
  }
  if (watch.expired()) {
    core_.log_refusal(*st.call.s, refusal::stream_idle, "a SetTensor stream sent nothing");
    return idle_status("SetTensor", watchdog_.idle());
  }
  if (c->IsCancelled()) return {grpc::StatusCode::CANCELLED, "SetTensor: the client cancelled"};
  return core_.set_tensor_finish(&st);
}

grpc::Status grpc_service::GetTensor(grpc::ServerContext *c, const pb::GetTensorRequest *q,
                                     grpc::ServerWriter<pb::DataChunk> *w) {
  meta_values mv(c);
  stream_watchdog::watch watch(watchdog_, c);
  grpc::Status st = core_.get_tensor(mv.meta, *q, [&](const pb::DataChunk &d) {
    const bool ok = w->Write(d);
    watch.touch();
    return ok;
  });
  if (watch.expired()) {
    core_.log_stream_idle(mv.meta);
    return idle_status("GetTensor", watchdog_.idle());
  }
  return st;
}
grpc::Status grpc_service::CopyBuffer(grpc::ServerContext *c, const pb::CopyBufferRequest *q, pb::Empty *) {
  return core_.copy_buffer(meta_values(c).meta, *q);
}
grpc::Status grpc_service::GraphRegister(grpc::ServerContext *c, const pb::GraphRegisterRequest *q, pb::Handle *r) {
  return core_.graph_register(meta_values(c).meta, *q, r);
}
grpc::Status grpc_service::GraphCompute(grpc::ServerContext *c, const pb::GraphComputeRequest *q,
                                        pb::GraphComputeReply *r) {
  return core_.graph_compute(meta_values(c).meta, *q, r);
}
grpc::Status grpc_service::GraphFree(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *) {
  return core_.graph_free(meta_values(c).meta, *q);
}

}  // namespace bp::remote::server
