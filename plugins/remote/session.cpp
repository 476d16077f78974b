// session.cpp: the connection to one bp-serve: the channel (TLS or
// plaintext, keepalive), Hello, the Lifeline reader that notices a server
// that died, and the calls' deadlines, metadata and failure mapping.
//
// A lost session stays lost: every call in flight is cancelled at once
// (so it returns within moments, not at its deadline) and every later call
// on anything made in it returns DEVICE_LOST without touching the network.
#include <chrono>
#include <cinttypes>

#include "backplane/version.h"
#include "fingerprint.hpp"
#include "protocol.hpp"
#include "remote.hpp"
#include "status_map.hpp"

namespace bp::remote_plugin {
namespace {

std::chrono::system_clock::time_point after_ms(int64_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

std::shared_ptr<grpc::Channel> make_channel(const server_conn &conn) {
  grpc::ChannelArguments args;
  // A peer that stops answering without closing the connection (a cable
  // pulled, a host frozen) is found by HTTP/2 pings: every 10 s, dead after
  // 5 s without an answer. The server's heartbeats keep the ping policy
  // satisfied (there is data between pings).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A restarted server is found again within a second or two.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Each server its own connection, never shared with another channel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (conn.config->tls_ca.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = conn.config->tls_ca;
    ssl.pem_private_key = conn.config->tls_key;
    ssl.pem_cert_chain = conn.config->tls_cert;
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(conn.address, creds, args);
}

void add_metadata(grpc::ClientContext *ctx, const session *s, const client_config &cfg) {
  if (s) ctx->AddMetadata(bp::remote::k_session_key, s->id_text);
  if (!cfg.token.empty()) ctx->AddMetadata(bp::remote::k_token_key, cfg.token);
}

// Why Hello failed, in words that name the fix.
bp_status hello_failed(const server_conn &conn, const grpc::Status &st, bp_error *err) {
  const client_config &cfg = *conn.config;
  const std::string said = st.error_message();
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return bp_error_setf(
          err, BP_ERR_UNAVAILABLE,
          "server %s: cannot open a session (%s after at most %" PRId64
          " ms: %s); is bp-serve running there, and does it use TLS exactly when BP_REMOTE_TLS_CA is "
          "set (here it is %s)?",
          conn.address.c_str(), st.error_code() == grpc::StatusCode::UNAVAILABLE ? "unavailable" : "no answer",
          cfg.connect_timeout_ms, said.c_str(), cfg.tls_ca.empty() ? "not set: plaintext" : "set: TLS");
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return bp_error_setf(err, BP_ERR_RESOURCE_EXHAUSTED, "server %s refused a new session: %s", conn.address.c_str(),
                           said.c_str());
    case grpc::StatusCode::FAILED_PRECONDITION:
      return bp_error_setf(err, BP_ERR_INCOMPATIBLE,
                           "server %s refused this client (protocol %u, Backplane %s, op table %s): %s; use the same "
                           "Backplane version on both sides",
                           conn.address.c_str(), bp::remote::k_protocol_version, BP_VERSION_STRING,
                           op_table_fingerprint().c_str(), said.c_str());
    default: {
      const mapped_status m = map_status(st.error_code(), said, "Hello", conn.address);
      return bp_error_set(err, m.code == BP_ERR_DEVICE_LOST ? BP_ERR_UNAVAILABLE : m.code, m.message.c_str());
    }
  }
}

void read_lifeline(session *s) {
  pb::LifelineRequest req;
  auto reader = s->server->stub->Lifeline(&s->lifeline_ctx, req);
  pb::Heartbeat hb;
  while (reader->Read(&hb)) {
  }
  const grpc::Status st = reader->Finish();
  s->mark_lost("its Lifeline stream ended (" + std::string(st.ok() ? "closed by the server" : st.error_message()) +
               ")");
}

bp_status open_session(server_conn *conn, std::shared_ptr<session> *out, bp_error *err) {
  const client_config &cfg = *conn->config;
  pb::HelloRequest req;
  req.set_protocol_version(bp::remote::k_protocol_version);
  req.set_client_version(BP_VERSION_STRING);
  req.set_op_table_fingerprint(op_table_fingerprint());
  pb::HelloReply reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(after_ms(cfg.connect_timeout_ms));
  add_metadata(&ctx, nullptr, cfg);
  const grpc::Status st = conn->stub->Hello(&ctx, req, &reply);
  if (!st.ok()) return hello_failed(*conn, st, err);
  if (reply.protocol_version() != bp::remote::k_protocol_version)
    return bp_error_setf(err, BP_ERR_INCOMPATIBLE,
                         "server %s speaks remote protocol %u (bp-serve %s), this client %u (Backplane %s); use the "
                         "same Backplane version on both sides",
                         conn->address.c_str(), reply.protocol_version(), reply.server_version().c_str(),
                         bp::remote::k_protocol_version, BP_VERSION_STRING);
  if (!reply.op_table_fingerprint().empty() && reply.op_table_fingerprint() != op_table_fingerprint())
    return bp_error_setf(err, BP_ERR_INCOMPATIBLE,
                         "server %s (bp-serve %s) has op table %s, this client (Backplane %s) %s; use the same "
                         "Backplane version on both sides",
                         conn->address.c_str(), reply.server_version().c_str(), reply.op_table_fingerprint().c_str(),
                         BP_VERSION_STRING, op_table_fingerprint().c_str());
  auto s = std::make_shared<session>();
  s->server = conn;
  s->id_text = reply.session();
  s->hello = std::move(reply);
  add_metadata(&s->lifeline_ctx, s.get(), cfg);
  session *raw = s.get();
  s->lifeline = std::thread([raw] { read_lifeline(raw); });
  bp_host_logf(conn->host, BP_LOG_DEBUG, "session %s with %s (server %s, bp-serve %s, %d devices)", s->id_text.c_str(),
               conn->address.c_str(), s->hello.server_id().c_str(), s->hello.server_version().c_str(),
               s->hello.devices_size());
  *out = std::move(s);
  return BP_OK;
}

}  // namespace

void session::mark_lost(const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (lost.exchange(true)) return;
    reason = why;
    for (grpc::ClientContext *c : calls) c->TryCancel();
  }
  // Outside the lock: the host's log sink is the application's code.
  if (!closing.load())
    bp_host_logf(server->host, BP_LOG_ERROR, "session with %s lost: %s", server->address.c_str(), why.c_str());
}

std::string session::lost_reason() {
  std::lock_guard<std::mutex> lock(mu);
  return reason;
}

session::~session() {
  closing.store(true);
  lifeline_ctx.TryCancel();
  if (lifeline.joinable()) lifeline.join();
}

call::call(session *s, int64_t timeout_ms, int64_t extra_ms) : s_(s) {
  s->call_count.fetch_add(1, std::memory_order_relaxed);
  ctx_.set_deadline(after_ms(timeout_ms + extra_ms));
  add_metadata(&ctx_, s, *s->server->config);
  std::lock_guard<std::mutex> lock(s->mu);
  s->calls.insert(&ctx_);
  if (s->lost.load()) ctx_.TryCancel();
}

call::~call() {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->calls.erase(&ctx_);
}

bp_status session_check(session *s, bp_error *err) {
  if (!s || !s->lost.load(std::memory_order_acquire)) return BP_OK;
  return bp_error_setf(err, BP_ERR_DEVICE_LOST,
                       "the session with server %s was lost: %s; free its buffers, backends and events and create new "
                       "ones (a new backend opens a new session once bp-serve answers again)",
                       s->server->address.c_str(), s->lost_reason().c_str());
}

bp_status rpc_failed(session *s, const grpc::Status &st, const char *what, bp_error *err) {
  if (s->lost.load() &&
      (st.error_code() == grpc::StatusCode::CANCELLED || st.error_code() == grpc::StatusCode::UNAVAILABLE))
    return session_check(s, err);
  const mapped_status m = map_status(st.error_code(), st.error_message(), what, s->server->address);
  if (m.session_lost) {
    s->mark_lost(m.message);
    return session_check(s, err);
  }
  return bp_error_set(err, m.code, m.message.c_str());
}

bp_status server_connect(server_conn *conn, bp_error *err) {
  conn->channel = make_channel(*conn);
  conn->stub = pb::Remote::NewStub(conn->channel);
  std::shared_ptr<session> s;
  if (bp_status st = open_session(conn, &s, err); st != BP_OK) return st;
  conn->server_id = s->hello.server_id();
  std::lock_guard<std::mutex> lock(conn->mu);
  conn->current = std::move(s);
  return BP_OK;
}

bp_status server_session(server_conn *conn, bool reopen, std::shared_ptr<session> *out, bp_error *err) {
  std::lock_guard<std::mutex> lock(conn->mu);
  if (conn->current && !conn->current->lost.load()) {
    *out = conn->current;
    return BP_OK;
  }
  if (!reopen || !conn->stub) {
    if (conn->current) return session_check(conn->current.get(), err);
    return bp_error_setf(err, BP_ERR_DEVICE_LOST, "server %s has no session", conn->address.c_str());
  }
  std::shared_ptr<session> s;
  if (bp_status st = open_session(conn, &s, err); st != BP_OK) {
    if (st == BP_ERR_UNAVAILABLE) st = BP_ERR_DEVICE_LOST;
    if (err) err->code = st;
    return st;
  }
  if (s->hello.server_id() != conn->server_id) {
    s->closing.store(true);
    return bp_error_setf(err, BP_ERR_DEVICE_LOST,
                         "server %s answers again but as server '%s', not '%s'; its devices may differ: reload the "
                         "remote plugin (or restart the process) to list them again",
                         conn->address.c_str(), s->hello.server_id().c_str(), conn->server_id.c_str());
  }
  bp_host_logf(conn->host, BP_LOG_INFO, "new session %s with %s (the previous one was lost)", s->id_text.c_str(),
               conn->address.c_str());
  conn->current = s;
  *out = std::move(s);
  return BP_OK;
}

void server_close(server_conn *conn) {
  std::shared_ptr<session> s;
  {
    std::lock_guard<std::mutex> lock(conn->mu);
    s = std::move(conn->current);
  }
  if (!s) return;
  bp_host_logf(conn->host, BP_LOG_INFO, "closing the session with %s after %llu calls", conn->address.c_str(),
               static_cast<unsigned long long>(s->call_count.load()));
  s->closing.store(true);
  if (!s->lost.load()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(after_ms(1000));
    add_metadata(&ctx, s.get(), *conn->config);
    pb::Empty reply;
    conn->stub->Goodbye(&ctx, pb::GoodbyeRequest(), &reply);
  }
}

}  // namespace bp::remote_plugin
