// service_core.cpp: the handlers of remote.proto (service_core.hpp).
#include "service_core.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "graph_rebuild.hpp"
#include "protocol.hpp"
#include "status.hpp"
#include "token.hpp"

namespace bp::remote::server {
namespace {

using lock = std::lock_guard<std::mutex>;

constexpr size_t k_max_backend_params = 32;

// Strict decimal u64: digits only, no sign, no overflow.
bool parse_u64(const std::string &text, uint64_t *out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// True when [offset, offset + size) lies inside |limit| bytes (overflow-safe).
bool inside(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

std::string range_text(uint64_t offset, uint64_t size, uint64_t limit) {
  return "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") are outside the buffer of " +
         std::to_string(limit) + " bytes";
}

grpc::Status closed_session() {
  return not_found("the session is closed (Goodbye, lost lifeline or server restart): call Hello again");
}

// The Param list as a backend parameter string "k=v,k=v", refusing
// anything that could smuggle another key or spec in.
bool params_text(const pb::BackendOpenRequest &req, std::string *out, std::string *why) {
  if (static_cast<size_t>(req.params_size()) > k_max_backend_params) {
    *why = std::to_string(req.params_size()) + " params: at most " + std::to_string(k_max_backend_params);
    return false;
  }
  for (const pb::Param &p : req.params()) {
    if (p.key().empty() || p.key().size() > 64) {
      *why = "a param key must have 1 to 64 characters";
      return false;
    }
    for (char c : p.key()) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
        *why = "param key '" + p.key() + "' may hold only a-z, 0-9 and _";
        return false;
      }
    }
    if (p.value().size() > 256) {
      *why = "the value of param '" + p.key() + "' is longer than 256 bytes";
      return false;
    }
    for (char c : p.value()) {
      if (c == ',' || c == ';' || c == '=' || c == ':' || static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) > 0x7e) {
        *why = "the value of param '" + p.key() + "' holds a character that is not allowed (, ; = : or non-printable)";
        return false;
      }
    }
    if (!out->empty()) *out += ",";
    *out += p.key() + "=" + p.value();
  }
  return true;
}

remote_buffer *find_buffer(session &s, uint64_t h) {
  auto it = s.buffers.find(h);
  return it == s.buffers.end() ? nullptr : it->second.get();
}
remote_backend *find_backend(session &s, uint64_t h) {
  auto it = s.backends.find(h);
  return it == s.backends.end() ? nullptr : it->second.get();
}

grpc::Status no_buffer(uint64_t h) {
  return not_found("buffer handle " + std::to_string(h) + " is unknown in this session (freed, or from another)");
}
grpc::Status no_backend(uint64_t h) {
  return not_found("backend handle " + std::to_string(h) + " is unknown in this session (freed, or from another)");
}

}  // namespace

service_core::service_core(service_options opt) : opt_(std::move(opt)), sessions_(opt_.max_sessions) {}

service_core::~service_core() { shutdown(); }

grpc::Status service_core::authorize(const call_meta &m) const {
  if (opt_.token.empty()) return grpc::Status::OK;
  // Compared in full whatever its content; never logged or echoed.
  if (m.token == nullptr || !constant_time_equal(*m.token, opt_.token)) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "missing or wrong token in the bp-token metadata: use the token bp-serve was started with"};
  }
  return grpc::Status::OK;
}

grpc::Status service_core::enter(const call_meta &m, std::shared_ptr<session> *s) {
  if (grpc::Status st = authorize(m); !st.ok()) return st;
  if (stopping()) return {grpc::StatusCode::UNAVAILABLE, "bp-serve is shutting down"};
  uint64_t id = 0;
  if (m.session == nullptr || !parse_u64(*m.session, &id)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "the bp-session metadata is missing or not a decimal session id"};
  }
  *s = sessions_.find(id);
  if (*s == nullptr) return closed_session();
  (*s)->calls.fetch_add(1, std::memory_order_relaxed);
  return grpc::Status::OK;
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
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "client and server differ: the client (Backplane " + req.client_version() + ") speaks protocol " +
                std::to_string(req.protocol_version()) + " with op table " + req.op_table_fingerprint() +
                ", this server (Backplane " + bp_version_string() + ") speaks protocol " +
                std::to_string(k_protocol_version) + " with op table " + fp +
                ": run the same Backplane version on both sides"};
  }
  std::shared_ptr<session> s = sessions_.open();
  if (s == nullptr) {
    return exhausted("bp-serve already serves " + std::to_string(opt_.max_sessions) +
                     " sessions (--max-clients): try again later");
  }
  reply->set_protocol_version(k_protocol_version);
  reply->set_server_version(bp_version_string());
  reply->set_op_table_fingerprint(fp);
  reply->set_server_id(opt_.server_id);
  reply->set_session(s->id);
  spdlog::info("session {:016x} opened by a client of Backplane {}", s->id, req.client_version());
  for (size_t i = 0; i < opt_.devices.size(); ++i) {
    bp_device *dev = opt_.devices[i];
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_get_info(dev, &info) != BP_OK) continue;
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
  return grpc::Status::OK;
}

grpc::Status service_core::lifeline_attach(const call_meta &m, std::shared_ptr<session> *out) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  if (s->lifeline) return {grpc::StatusCode::FAILED_PRECONDITION, "this session already has a lifeline"};
  s->lifeline = true;
  *out = s;
  return grpc::Status::OK;
}

void service_core::lifeline_end(const std::shared_ptr<session> &s) {
  spdlog::info("session {:016x} ended after {} calls; its objects are freed", s->id, s->calls.load());
  sessions_.close(s->id);
  notify_all();
}

bool service_core::lifeline_wait(const session &s, std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> l(wait_mu_);
  wait_cv_.wait_for(l, d, [&] { return stopping() || sessions_.find(s.id) == nullptr; });
  return !stopping() && sessions_.find(s.id) != nullptr;
}

grpc::Status service_core::goodbye(const call_meta &m) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  sessions_.close(s->id);
  notify_all();
  return grpc::Status::OK;
}

grpc::Status service_core::device_memory(const call_meta &m, const pb::DeviceRef &req, pb::DeviceMemoryReply *reply) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.device() >= opt_.devices.size()) {
    return invalid("device " + std::to_string(req.device()) + ": this server has " +
                   std::to_string(opt_.devices.size()) + " devices");
  }
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (bp_device_get_info(opt_.devices[req.device()], &info) != BP_OK) return from_last_error("device info: ");
  reply->set_free(info.memory_free);
  reply->set_total(info.memory_total);
  return grpc::Status::OK;
}

grpc::Status service_core::backend_open(const call_meta &m, const pb::BackendOpenRequest &req, pb::Handle *reply) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.device() >= opt_.devices.size()) {
    return invalid("device " + std::to_string(req.device()) + ": this server has " +
                   std::to_string(opt_.devices.size()) + " devices");
  }
  std::string params, why;
  if (!params_text(req, &params, &why)) return invalid("BackendOpen: " + why);
  lock l(s->mu);
  if (s->closed) return closed_session();
  if (s->handle_count() >= opt_.max_handles) {
    return exhausted("this session holds " + std::to_string(s->handle_count()) +
                     " handles, its quota: free backends, buffers or graphs first");
  }
  auto be = std::make_unique<remote_backend>();
  be->device = req.device();
  if (bp_backend_new_on_device(opt_.devices[req.device()], params.c_str(), &be->backend) != BP_OK) {
    return from_last_error("BackendOpen: ");
  }
  const uint64_t h = s->new_handle();
  s->backends.emplace(h, std::move(be));
  reply->set_id(h);
  return grpc::Status::OK;
}

grpc::Status service_core::backend_free(const call_meta &m, const pb::Handle &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  if (!find_backend(*s, req.id())) return no_backend(req.id());
  s->drop_graphs_using(req.id(), 0);
  s->backends.erase(req.id());
  return grpc::Status::OK;
}

grpc::Status service_core::backend_synchronize(const call_meta &m, const pb::Handle &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_backend *be = find_backend(*s, req.id());
  if (!be) return no_backend(req.id());
  if (bp_backend_synchronize(be->backend) != BP_OK) return from_last_error("BackendSynchronize: ");
  return grpc::Status::OK;
}

grpc::Status service_core::supports_op(const call_meta &m, const pb::SupportsOpRequest &req,
                                       pb::SupportsOpReply *reply) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.tensors_size() == 0) return invalid("SupportsOp: no tensors: the node comes last");
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_backend *be = find_backend(*s, req.backend());
  if (!be) return no_backend(req.backend());
  rebuilt_graph g;
  if (grpc::Status st = rebuild_tensors(*s, req.tensors(), false, &g); !st.ok()) return st;
  reply->set_supported(bp_backend_supports_op(be->backend, g.tensors.back()));
  bp_context_free(g.ctx);
  return grpc::Status::OK;
}

grpc::Status service_core::buffer_alloc(const call_meta &m, const pb::BufferAllocRequest &req,
                                        pb::BufferAllocReply *reply) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.device() >= opt_.devices.size()) {
    return invalid("device " + std::to_string(req.device()) + ": this server has " +
                   std::to_string(opt_.devices.size()) + " devices");
  }
  // Rounded up to even: the byte tensor over the buffer is f16.
  if (req.size() > (uint64_t{1} << 62)) return invalid("BufferAlloc: " + std::to_string(req.size()) + " bytes");
  const uint64_t allocated = (req.size() + 1) & ~uint64_t{1};
  lock l(s->mu);
  if (s->closed) return closed_session();
  if (s->handle_count() >= opt_.max_handles) {
    return exhausted("this session holds " + std::to_string(s->handle_count()) +
                     " handles, its quota: free backends, buffers or graphs first");
  }
  if (opt_.max_memory != 0 && (allocated > opt_.max_memory || s->memory_used > opt_.max_memory - allocated)) {
    return exhausted("BufferAlloc of " + std::to_string(req.size()) + " bytes: the session holds " +
                     std::to_string(s->memory_used) + " of its " + std::to_string(opt_.max_memory) +
                     " byte quota (--max-memory)");
  }
  bp_buffer_type *buft = bp_device_buffer_type(opt_.devices[req.device()]);
  if (buft == nullptr) return from_last_error("BufferAlloc: ");
  auto b = std::make_unique<remote_buffer>();
  b->device = req.device();
  b->size = req.size();
  b->allocated = allocated;
  if (bp_buffer_type_alloc(buft, static_cast<size_t>(allocated), &b->buffer) != BP_OK) {
    return from_last_error("BufferAlloc of " + std::to_string(req.size()) + " bytes: ");
  }
  if (allocated > 0) {
    b->ctx = bp_context_new(1);
    b->bytes = b->ctx ? bp_tensor_new_1d(b->ctx, BP_TYPE_F16, static_cast<int64_t>(allocated / 2)) : nullptr;
    if (b->bytes == nullptr || bp_buffer_place_tensor(b->buffer, b->bytes, 0) != BP_OK) {
      return from_last_error("BufferAlloc: ");
    }
  }
  const uint64_t h = s->new_handle();
  s->memory_used += allocated;
  s->buffers.emplace(h, std::move(b));
  reply->set_id(h);
  reply->set_size(req.size());
  return grpc::Status::OK;
}

grpc::Status service_core::buffer_free(const call_meta &m, const pb::Handle &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_buffer *b = find_buffer(*s, req.id());
  if (!b) return no_buffer(req.id());
  s->drop_graphs_using(0, req.id());
  s->memory_used -= b->allocated;
  s->buffers.erase(req.id());
  return grpc::Status::OK;
}

grpc::Status service_core::buffer_clear(const call_meta &m, const pb::BufferClearRequest &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.value() > 255) return invalid("BufferClear: value " + std::to_string(req.value()) + " is not a byte");
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_buffer *b = find_buffer(*s, req.buffer());
  if (!b) return no_buffer(req.buffer());
  if (bp_buffer_clear(b->buffer, static_cast<uint8_t>(req.value())) != BP_OK) return from_last_error("BufferClear: ");
  return grpc::Status::OK;
}

grpc::Status service_core::buffer_memset(const call_meta &m, const pb::BufferMemsetRequest &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.value() > 255) return invalid("BufferMemset: value " + std::to_string(req.value()) + " is not a byte");
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_buffer *b = find_buffer(*s, req.buffer());
  if (!b) return no_buffer(req.buffer());
  if (!inside(req.offset(), req.size(), b->size)) {
    return invalid("BufferMemset: " + range_text(req.offset(), req.size(), b->size));
  }
  if (req.size() == 0) return grpc::Status::OK;
  if (bp_tensor_memset(b->bytes, static_cast<uint8_t>(req.value()), req.offset(), req.size()) != BP_OK) {
    return from_last_error("BufferMemset: ");
  }
  return grpc::Status::OK;
}

grpc::Status service_core::set_tensor_begin(const call_meta &m, set_stream *st) { return enter(m, &st->s); }

grpc::Status service_core::set_tensor_chunk(set_stream *st, const pb::SetTensorChunk &msg) {
  if (!st->s) return {grpc::StatusCode::INTERNAL, "SetTensor: chunk before begin"};
  session &s = *st->s;
  lock l(s.mu);
  if (s.closed) return closed_session();
  if (!st->have_header) {
    if (!msg.has_header()) return invalid("SetTensor: the first message must carry the header");
    const pb::SetTensorHeader &h = msg.header();
    remote_buffer *b = find_buffer(s, h.buffer());
    if (!b) return no_buffer(h.buffer());
    if (!inside(h.offset(), h.size(), b->size))
      return invalid("SetTensor: " + range_text(h.offset(), h.size(), b->size));
    st->have_header = true;
    st->buffer = h.buffer();
    st->offset = h.offset();
    st->size = h.size();
  } else if (msg.has_header()) {
    return invalid("SetTensor: only the first message carries a header");
  }
  const std::string &data = msg.data();
  if (data.empty()) return grpc::Status::OK;
  if (data.size() > st->size - st->written) {
    return invalid("SetTensor: " + std::to_string(st->written + data.size()) + " bytes sent, the header announced " +
                   std::to_string(st->size));
  }
  // Looked up again: the buffer may have been freed between two messages.
  remote_buffer *b = find_buffer(s, st->buffer);
  if (!b) return no_buffer(st->buffer);
  if (bp_tensor_set(b->bytes, data.data(), st->offset + st->written, data.size()) != BP_OK) {
    return from_last_error("SetTensor: ");
  }
  st->written += data.size();
  return grpc::Status::OK;
}

grpc::Status service_core::set_tensor_finish(set_stream *st) {
  if (!st->have_header) return invalid("SetTensor: the stream ended without a header");
  if (st->written != st->size) {
    return invalid("SetTensor: the stream ended after " + std::to_string(st->written) + " of the " +
                   std::to_string(st->size) + " bytes its header announced");
  }
  return grpc::Status::OK;
}

grpc::Status service_core::get_tensor(const call_meta &m, const pb::GetTensorRequest &req,
                                      const std::function<bool(const pb::DataChunk &)> &write) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  const uint64_t chunk = req.chunk_bytes() == 0 ? k_default_chunk_bytes : req.chunk_bytes();
  if (chunk > k_max_chunk_bytes) {
    return invalid("GetTensor: chunk_bytes " + std::to_string(chunk) + " is above the limit " +
                   std::to_string(k_max_chunk_bytes));
  }
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_buffer *b = find_buffer(*s, req.buffer());
  if (!b) return no_buffer(req.buffer());
  if (!inside(req.offset(), req.size(), b->size)) {
    return invalid("GetTensor: " + range_text(req.offset(), req.size(), b->size));
  }
  pb::DataChunk out;
  for (uint64_t done = 0; done < req.size();) {
    const uint64_t n = std::min<uint64_t>(chunk, req.size() - done);
    std::string *data = out.mutable_data();
    data->resize(n);
    if (bp_tensor_get(b->bytes, data->data(), req.offset() + done, n) != BP_OK) return from_last_error("GetTensor: ");
    if (!write(out)) return {grpc::StatusCode::CANCELLED, "GetTensor: the client went away"};
    done += n;
  }
  return grpc::Status::OK;
}

grpc::Status service_core::copy_buffer(const call_meta &m, const pb::CopyBufferRequest &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_buffer *src = find_buffer(*s, req.src_buffer());
  if (!src) return no_buffer(req.src_buffer());
  remote_buffer *dst = find_buffer(*s, req.dst_buffer());
  if (!dst) return no_buffer(req.dst_buffer());
  if (!inside(req.src_offset(), req.size(), src->size)) {
    return invalid("CopyBuffer source: " + range_text(req.src_offset(), req.size(), src->size));
  }
  if (!inside(req.dst_offset(), req.size(), dst->size)) {
    return invalid("CopyBuffer destination: " + range_text(req.dst_offset(), req.size(), dst->size));
  }
  if (req.size() == 0) return grpc::Status::OK;
  if (src == dst && req.src_offset() < req.dst_offset() + req.size() &&
      req.dst_offset() < req.src_offset() + req.size()) {
    return invalid("CopyBuffer: the source and destination ranges overlap");
  }
  // Even offsets and size: f16 views of both, copied by the plugins (device
  // to device where they can). Otherwise through host memory, a chunk at a time.
  if (req.src_offset() % 2 == 0 && req.dst_offset() % 2 == 0 && req.size() % 2 == 0) {
    bp_context *ctx = bp_context_new(2);
    const int64_t n = static_cast<int64_t>(req.size() / 2);
    bp_tensor *a = ctx ? bp_view_1d(ctx, src->bytes, n, req.src_offset()) : nullptr;
    bp_tensor *b = a ? bp_view_1d(ctx, dst->bytes, n, req.dst_offset()) : nullptr;
    const bool ok = b != nullptr && bp_tensor_copy(a, b) == BP_OK;
    grpc::Status st = ok ? grpc::Status::OK : from_last_error("CopyBuffer: ");
    bp_context_free(ctx);
    return st;
  }
  std::vector<char> tmp(std::min<uint64_t>(req.size(), k_default_chunk_bytes));
  for (uint64_t done = 0; done < req.size();) {
    const uint64_t n = std::min<uint64_t>(tmp.size(), req.size() - done);
    if (bp_tensor_get(src->bytes, tmp.data(), req.src_offset() + done, n) != BP_OK ||
        bp_tensor_set(dst->bytes, tmp.data(), req.dst_offset() + done, n) != BP_OK) {
      return from_last_error("CopyBuffer: ");
    }
    done += n;
  }
  return grpc::Status::OK;
}

grpc::Status service_core::graph_register(const call_meta &m, const pb::GraphRegisterRequest &req, pb::Handle *reply) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  if (req.nodes_size() == 0) return invalid("GraphRegister: the graph has no nodes");
  for (int i = 0; i < req.nodes_size(); ++i) {
    if (req.nodes(i) >= static_cast<uint32_t>(req.tensors_size())) {
      return invalid("GraphRegister: nodes[" + std::to_string(i) + "] is tensor " + std::to_string(req.nodes(i)) +
                     " but the description has " + std::to_string(req.tensors_size()) + " tensors");
    }
  }
  lock l(s->mu);
  if (s->closed) return closed_session();
  remote_backend *be = find_backend(*s, req.backend());
  if (!be) return no_backend(req.backend());
  if (s->handle_count() >= opt_.max_handles) {
    return exhausted("this session holds " + std::to_string(s->handle_count()) +
                     " handles, its quota: free backends, buffers or graphs first");
  }
  rebuilt_graph r;
  if (grpc::Status st = rebuild_tensors(*s, req.tensors(), true, &r); !st.ok()) return st;
  auto g = std::make_unique<remote_graph>();
  g->ctx = r.ctx;  // owned by g from here
  g->backend = req.backend();
  g->buffers = r.buffers;
  for (uint64_t h : r.buffers) {
    bp_buffer_type *buft = bp_buffer_get_type(s->buffers.at(h)->buffer);
    if (!bp_backend_supports_buft(be->backend, buft)) {
      return invalid(std::string("GraphRegister: buffer handle ") + std::to_string(h) + " is memory of type '" +
                     bp_buffer_type_name(buft) + "', which backend " + bp_backend_name(be->backend) +
                     " cannot use: allocate on the backend's device");
    }
  }
  g->graph = bp_graph_new(g->ctx, 2 * static_cast<size_t>(req.tensors_size()) + 8);
  if (g->graph == nullptr) return from_last_error("GraphRegister: ");
  for (int i = 0; i < req.nodes_size(); ++i) {
    const uint32_t idx = req.nodes(i);
    if (bp_graph_build(g->graph, r.tensors[idx]) != BP_OK) {
      return from_last_error("GraphRegister: node " + std::to_string(idx) + ": ");
    }
  }
  if (bp_graph_validate(g->graph) != BP_OK) return from_last_error("GraphRegister: ");
  // A plan where the backend has them; UNIMPLEMENTED means none (or a node
  // it cannot run, which the compute reports by name).
  if (bp_graph_plan_new(be->backend, g->graph, &g->plan) != BP_OK) {
    g->plan = nullptr;
    if (bp_last_status() != BP_ERR_UNIMPLEMENTED) return from_last_error("GraphRegister: ");
  }
  const uint64_t h = s->new_handle();
  s->graphs.emplace(h, std::move(g));
  reply->set_id(h);
  return grpc::Status::OK;
}

grpc::Status service_core::graph_compute(const call_meta &m, const pb::Handle &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  auto it = s->graphs.find(req.id());
  if (it == s->graphs.end()) {
    return not_found("graph handle " + std::to_string(req.id()) +
                     " is unknown in this session (freed, or dropped with its backend or a buffer it used)");
  }
  remote_graph &g = *it->second;
  remote_backend *be = find_backend(*s, g.backend);
  if (!be) return no_backend(g.backend);
  bp_status st = BP_OK;
  if (g.plan) {
    st = bp_graph_plan_compute_async(g.plan);
    if (st == BP_OK) st = bp_backend_synchronize(be->backend);
  } else {
    st = bp_backend_graph_compute(be->backend, g.graph);
  }
  if (st != BP_OK) return from_last_error("GraphCompute: ");
  return grpc::Status::OK;
}

grpc::Status service_core::graph_free(const call_meta &m, const pb::Handle &req) {
  std::shared_ptr<session> s;
  if (grpc::Status st = enter(m, &s); !st.ok()) return st;
  lock l(s->mu);
  if (s->closed) return closed_session();
  if (s->graphs.erase(req.id()) == 0) {
    return not_found("graph handle " + std::to_string(req.id()) + " is unknown in this session");
  }
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
