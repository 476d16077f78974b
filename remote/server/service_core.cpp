// service_core.cpp: sessions, the call preamble and the session limits
// (service_core.hpp). Buffers: service_buffers.cpp; backends and graphs:
// service_graphs.cpp.
#include "service_core.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "log_text.hpp"
#include "protocol.hpp"
#include "secure_random.hpp"
#include "service_util.hpp"
#include "token.hpp"

namespace bp::remote::server {
namespace {

using lock = std::lock_guard<std::mutex>;

const std::string &peer_of(const call_meta &m) {
  static const std::string none;
  return m.peer ? *m.peer : none;
}

}  // namespace

service_core::service_core(service_options opt) : opt_(std::move(opt)), sessions_(opt_.max_sessions) {
  if (opt_.max_threads == 0) opt_.max_threads = std::max(1u, std::thread::hardware_concurrency());
}

service_core::~service_core() { shutdown(); }

grpc::Status service_core::closed_session() {
  // The same words for a closed session, a never-opened one and one that
  // another connection opened: nobody learns which ids are live.
  return not_found(
      "the session is closed or unknown on this connection (Goodbye, lost lifeline or server restart): "
      "call Hello again");
}

grpc::Status service_core::authorize(const call_meta &m) const {
  if (opt_.token.empty()) return grpc::Status::OK;
  // Compared in full whatever its content; never logged or echoed. A second
  // bp-token header is refused: a proxy or client that sends two cannot say
  // which one it meant.
  if (m.token == nullptr || m.token_repeated || !constant_time_equal(*m.token, opt_.token)) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "missing, repeated or wrong token in the bp-token metadata: send once the token bp-serve was started "
            "with"};
  }
  return grpc::Status::OK;
}

grpc::Status service_core::enter(const call_meta &m, session_call *call) {
  if (grpc::Status st = authorize(m); !st.ok()) return st;
  if (stopping()) return {grpc::StatusCode::UNAVAILABLE, "bp-serve is shutting down"};
  if (m.session == nullptr || !is_session_id(*m.session)) {
    return invalid("the bp-session metadata is missing or not a session id (32 hex digits from Hello)");
  }
  bool foreign = false;
  std::shared_ptr<session> s = sessions_.find(*m.session, peer_of(m), &foreign);
  if (s == nullptr) {
    // Logged once per session, with only the id's first 8 digits: the log
    // is no place for a whole session id.
    if (foreign && sessions_.first_foreign_call(*m.session)) {
      spdlog::warn("a call from {} named session {}... of another connection: refused as unknown", log_text(peer_of(m)),
                   m.session->substr(0, 8));
    }
    return closed_session();
  }
  const uint32_t running = s->in_flight.fetch_add(1) + 1;
  if (opt_.max_session_calls != 0 && running > opt_.max_session_calls) {
    const std::string why = "this session has " + std::to_string(running - 1) +
                            " calls and streams in flight, its limit (--max-session-calls " +
                            std::to_string(opt_.max_session_calls) + "): wait for one to finish";
    log_refusal(*s, refusal::calls, why);
    s->in_flight.fetch_sub(1);  // a refused call holds no slot
    return exhausted(why);
  }
  s->calls.fetch_add(1, std::memory_order_relaxed);
  call->s = s;  // the guard uncounts the call when it returns
  return grpc::Status::OK;
}

void service_core::log_refusal(session &s, refusal r, const std::string &why) {
  if (s.first_refusal(r)) {
    spdlog::warn("session {}...: refused a call for {}: {} (logged once per session)", s.id.substr(0, 8),
                 refusal_name(r), why);
  }
}

void service_core::log_stream_idle(const call_meta &m) {
  if (m.session == nullptr) return;
  if (std::shared_ptr<session> s = sessions_.find(*m.session, peer_of(m))) {
    log_refusal(*s, refusal::stream_idle, "a GetTensor stream's reader stopped reading");
  }
}

grpc::Status service_core::check_handles(session &s) {
  if (s.handle_count() < opt_.max_handles) return grpc::Status::OK;
  const std::string why = "this session holds " + std::to_string(s.handle_count()) +
                          " handles, its quota (--max-handles): free backends, buffers or graphs first";
  log_refusal(s, refusal::handles, why);
  return exhausted(why);
}

void service_core::notify_all() {
  lock l(wait_mu_);
  wait_cv_.notify_all();
}

grpc::Status service_core::hello(const call_meta &m, const pb::HelloRequest &req, pb::HelloReply *reply) {
  if (grpc::Status st = authorize(m); !st.ok()) return st;
  if (stopping()) return {grpc::StatusCode::UNAVAILABLE, "bp-serve is shutting down"};
  const std::string fp = op_table_fingerprint();
  if (req.protocol_version() != k_protocol_version || req.op_table_fingerprint() != fp) {
    // The client's strings go back to it escaped and cut, like into the log.
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "client and server differ: the client (Backplane " + log_text(req.client_version()) + ") speaks protocol " +
                std::to_string(req.protocol_version()) + " with op table " + log_text(req.op_table_fingerprint()) +
                ", this server (Backplane " + bp_version_string() + ") speaks protocol " +
                std::to_string(k_protocol_version) + " with op table " + fp +
                ": run the same Backplane version on both sides"};
  }
  std::string why;
  std::shared_ptr<session> s = sessions_.open(peer_of(m), &why);
  if (s == nullptr) return exhausted(why);
  reply->set_protocol_version(k_protocol_version);
  reply->set_server_version(bp_version_string());
  reply->set_op_table_fingerprint(fp);
  reply->set_server_id(opt_.server_id);
  reply->set_session(s->id);
  spdlog::info("session {}... opened from {} by a client of Backplane {}", s->id.substr(0, 8), log_text(peer_of(m)),
               log_text(req.client_version()));
  for (size_t i = 0; i < opt_.devices.size(); ++i) {
    bp_device *dev = opt_.devices[i];
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_describe(dev, &info) != BP_OK) continue;
    pb::DeviceInfo *d = reply->add_devices();
    d->set_index(static_cast<uint32_t>(i));
    d->set_id(info.id ? info.id : "");
    d->set_name(info.name ? info.name : "");
    d->set_description(info.description ? info.description : "");
    d->set_type(static_cast<uint32_t>(info.type));
    d->set_memory_free(info.memory_free);
    d->set_memory_total(info.memory_total);
    // Host memory, pinned buffers and events do not cross the network.
    d->set_caps(info.caps & BP_DEVICE_CAP_ASYNC);
    bp_buffer_type *buft = bp_device_buffer_type(dev);
    d->set_buffer_alignment(buft ? bp_buffer_type_alignment(buft) : 0);
    d->set_buffer_max_size(buft ? bp_buffer_type_max_size(buft) : 0);
    d->set_plugin(info.plugin && bp_plugin_name(info.plugin) ? bp_plugin_name(info.plugin) : "");
  }
  reply->set_max_message_bytes(k_max_message_bytes);
  reply->set_session_memory_quota(opt_.max_memory);
  reply->set_session_handle_quota(opt_.max_handles);
  reply->set_session_call_quota(opt_.max_session_calls);
  reply->set_session_thread_quota(opt_.max_threads);
  reply->set_session_graph_memory_quota(opt_.max_graph_memory);
  return grpc::Status::OK;
}

grpc::Status service_core::lifeline_attach(const call_meta &m, std::shared_ptr<session> *out) {
  session_call call;
  if (grpc::Status st = enter(m, &call); !st.ok()) return st;
  session &s = *call.s;
  lock l(s.mu);
  if (s.closed) return closed_session();
  if (s.lifeline) return {grpc::StatusCode::FAILED_PRECONDITION, "this session already has a lifeline"};
  s.lifeline = true;
  *out = call.s;
  return grpc::Status::OK;
}

void service_core::lifeline_end(const std::shared_ptr<session> &s) {
  spdlog::info("session {}... ended after {} calls; its objects are freed", s->id.substr(0, 8), s->calls.load());
  sessions_.close(s->id);
  notify_all();
}

bool service_core::lifeline_wait(const session &s, std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> l(wait_mu_);
  wait_cv_.wait_for(l, d, [&] { return stopping() || !sessions_.alive(s.id); });
  return !stopping() && sessions_.alive(s.id);
}

grpc::Status service_core::goodbye(const call_meta &m) {
  std::string id;
  {
    session_call call;
    if (grpc::Status st = enter(m, &call); !st.ok()) return st;
    id = call.s->id;
  }
  sessions_.close(id);
  notify_all();
  return grpc::Status::OK;
}

grpc::Status service_core::device_memory(const call_meta &m, const pb::DeviceRef &req, pb::DeviceMemoryReply *reply) {
  session_call call;
  if (grpc::Status st = enter(m, &call); !st.ok()) return st;
  if (req.device() >= opt_.devices.size()) return no_device(req.device(), opt_.devices.size());
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (bp_device_describe(opt_.devices[req.device()], &info) != BP_OK) return from_last_error("device info: ");
  reply->set_free(info.memory_free);
  reply->set_total(info.memory_total);
  return grpc::Status::OK;
}

size_t service_core::reap(std::chrono::steady_clock::duration grace) {
  const size_t n = sessions_.reap(clock::now(), grace);
  if (n) notify_all();
  return n;
}

void service_core::begin_shutdown() {
  stopping_.store(true);
  notify_all();
}

void service_core::shutdown() {
  begin_shutdown();
  sessions_.close_all();
}

}  // namespace bp::remote::server
