// service_core.hpp: bp-serve's request handling without the network. Each
// rpc of remote.proto is a plain method taking the call's metadata and
// messages and returning a grpc::Status, so the gRPC service
// (grpc_service.hpp), the tests and the fuzzer call the same code.
//
// Every method checks the token first (before any allocation), then finds
// the session named in the metadata (only if this connection opened it),
// counts the call against the session's calls in flight and holds the
// session's lock while it works.
//
// The handlers live in three files by area: service_core.cpp (sessions,
// limits), service_buffers.cpp (buffers and data), service_graphs.cpp
// (backends and graphs).
#pragma once

#include <backplane/backplane.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protocol.hpp"
#include "remote.pb.h"
#include "session.hpp"

namespace bp::remote {
// The fingerprint of the linked libbackplane's op table: what the server
// compares a client's Hello with.
inline std::string op_table_fingerprint() { return op_table_fingerprint_with(bp_op_name); }
}  // namespace bp::remote

namespace bp::remote::server {

namespace pb = ::backplane::remote::v1;

// What a call carries besides its messages; nullptr: absent.
struct call_meta {
  const std::string *token = nullptr;    // the bp-token metadata
  const std::string *session = nullptr;  // the bp-session metadata
  // The transport connection the call came on: its random id (made by
  // connection_id.hpp when the connection's first call arrives), with the
  // peer address for the log and the TLS identity. A session answers only
  // to the connection that opened it. nullptr: "".
  const std::string *peer = nullptr;
  bool token_repeated = false;  // bp-token sent more than once: refused
  // True once the client cancelled or its deadline passed; long handlers
  // (GraphRegister) stop then. Empty: never.
  std::function<bool()> cancelled;
};

struct service_options {
  std::string token;               // empty: no token required
  uint64_t max_memory = 0;         // bytes of buffers per session, 0: no limit
  uint32_t max_handles = 4096;     // backends + buffers + graphs per session
  size_t max_sessions = 64;        // 0: no limit
  uint32_t max_session_calls = 8;  // calls and streams in flight per session (the Lifeline aside)
  uint32_t max_threads = 0;        // worker threads a session's backends start per device; 0: the cores
  uint64_t max_graph_memory = uint64_t{256} << 20;  // bytes of registered graphs per session, 0: no limit
  std::vector<bp_device *> devices;                 // what clients see, in this order
  std::string server_id;                            // stable across restarts of this server
};

// One call in flight in a session: counted while it lives, so a session
// holds at most max_session_calls of the server's threads.
struct session_call {
  std::shared_ptr<session> s;
  session_call() = default;
  session_call(const session_call &) = delete;
  session_call &operator=(const session_call &) = delete;
  ~session_call() {
    if (s) s->in_flight.fetch_sub(1);
  }
};

// The state of one SetTensor stream between its messages.
struct set_stream {
  session_call call;
  bool have_header = false;
  uint64_t buffer = 0, offset = 0, size = 0, written = 0;
};

class service_core {
 public:
  explicit service_core(service_options opt);
  ~service_core();
  service_core(const service_core &) = delete;
  service_core &operator=(const service_core &) = delete;

  grpc::Status hello(const call_meta &m, const pb::HelloRequest &req, pb::HelloReply *reply);
  // Lifeline: attach marks the session held; the stream's end calls
  // lifeline_end, which closes the session and frees what it owns.
  grpc::Status lifeline_attach(const call_meta &m, std::shared_ptr<session> *out);
  void lifeline_end(const std::shared_ptr<session> &s);
  // Waits up to |d| for shutdown, a closed session or a notify. True while
  // the lifeline should go on.
  bool lifeline_wait(const session &s, std::chrono::milliseconds d);
  grpc::Status goodbye(const call_meta &m);

  grpc::Status device_memory(const call_meta &m, const pb::DeviceRef &req, pb::DeviceMemoryReply *reply);
  grpc::Status backend_open(const call_meta &m, const pb::BackendOpenRequest &req, pb::Handle *reply);
  grpc::Status backend_free(const call_meta &m, const pb::Handle &req);
  grpc::Status backend_synchronize(const call_meta &m, const pb::Handle &req);
  grpc::Status supports_op(const call_meta &m, const pb::SupportsOpRequest &req, pb::SupportsOpReply *reply);

  grpc::Status buffer_alloc(const call_meta &m, const pb::BufferAllocRequest &req, pb::BufferAllocReply *reply);
  grpc::Status buffer_free(const call_meta &m, const pb::Handle &req);
  grpc::Status buffer_clear(const call_meta &m, const pb::BufferClearRequest &req);
  grpc::Status buffer_memset(const call_meta &m, const pb::BufferMemsetRequest &req);

  // SetTensor: begin (token, session), then each message, then finish.
  grpc::Status set_tensor_begin(const call_meta &m, set_stream *st);
  grpc::Status set_tensor_chunk(set_stream *st, const pb::SetTensorChunk &msg);
  grpc::Status set_tensor_finish(set_stream *st);
  // GetTensor: |write| sends one chunk; false when the peer is gone. The
  // session's lock is not held while |write| waits for the peer.
  grpc::Status get_tensor(const call_meta &m, const pb::GetTensorRequest &req,
                          const std::function<bool(const pb::DataChunk &)> &write);
  grpc::Status copy_buffer(const call_meta &m, const pb::CopyBufferRequest &req);

  grpc::Status graph_register(const call_meta &m, const pb::GraphRegisterRequest &req, pb::Handle *reply);
  // |reply| may be NULL (no node times wanted).
  grpc::Status graph_compute(const call_meta &m, const pb::GraphComputeRequest &req, pb::GraphComputeReply *reply);
  grpc::Status graph_compute(const call_meta &m, const pb::Handle &req) {
    pb::GraphComputeRequest r;
    r.set_id(req.id());
    return graph_compute(m, r, nullptr);
  }
  grpc::Status graph_free(const call_meta &m, const pb::Handle &req);

  // UNAUTHENTICATED unless the call carries the token once (when there is one).
  grpc::Status authorize(const call_meta &m) const;
  // Logs, once per session, that |s| refused a call for reason |r|.
  void log_refusal(session &s, refusal r, const std::string &why);
  // log_refusal(stream_idle) for the session a call names, if it is its own.
  void log_stream_idle(const call_meta &m);
  // Closes sessions with no lifeline |grace| after their Hello.
  size_t reap(std::chrono::steady_clock::duration grace);
  // Refuses new calls (UNAVAILABLE) and ends every lifeline.
  void begin_shutdown();
  // begin_shutdown, then frees every session (call once no handler runs).
  void shutdown();
  bool stopping() const { return stopping_.load(); }
  size_t session_count() { return sessions_.size(); }
  // The bytes the registered graphs of the session |m| names are charged
  // with (graph_cost.hpp); 0 when it is not this connection's session.
  uint64_t graph_memory(const call_meta &m);
  const service_options &options() const { return opt_; }

 private:
  // Token, session lookup (this connection's only) and the call count: the
  // preamble of every call but Hello.
  grpc::Status enter(const call_meta &m, session_call *call);
  // enter, then |body| with the session locked and open.
  template <class Body>
  grpc::Status with_session(const call_meta &m, Body &&body) {
    session_call call;
    if (grpc::Status st = enter(m, &call); !st.ok()) return st;
    std::lock_guard<std::mutex> l(call.s->mu);
    if (call.s->closed) return closed_session();
    return body(*call.s);
  }
  static grpc::Status closed_session();
  // RESOURCE_EXHAUSTED for a handle quota reached in |s|, or OK.
  grpc::Status check_handles(session &s);
  // The worker threads a BackendOpen on |device| starts, with the params it
  // will be opened with (threads= made explicit), or a refusal.
  grpc::Status plan_threads(session &s, uint32_t device, const pb::BackendOpenRequest &req, std::string *params,
                            uint32_t *threads);
  // graph_register's work, with the session locked.
  grpc::Status register_graph(const call_meta &m, const pb::GraphRegisterRequest &req, pb::Handle *reply);
  // RESOURCE_EXHAUSTED (logged once per session) when a graph of |tensors|
  // holding |cost| bytes (|qualifier|: "" or "at least ") does not fit in
  // what is left of |s|'s --max-graph-memory; OK otherwise.
  grpc::Status check_graph_memory(session &s, int tensors, uint64_t cost, const char *qualifier);
  void notify_all();

  service_options opt_;
  session_table sessions_;
  std::atomic<bool> stopping_{false};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
};

}  // namespace bp::remote::server
