// service_core.hpp: bp-serve's request handling without the network. Each
// rpc of remote.proto is a plain method taking the call's metadata and
// messages and returning a grpc::Status, so the gRPC service
// (grpc_service.hpp), the tests and the fuzzer call the same code.
//
// Every method checks the token first (before any allocation), then finds
// the session named in the metadata and holds its lock while it works.
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

#include "remote.pb.h"
#include "session.hpp"

namespace bp::remote::server {

namespace pb = ::backplane::remote::v1;

// What a call carries besides its messages (gRPC metadata); nullptr: absent.
struct call_meta {
  const std::string *token = nullptr;
  const std::string *session = nullptr;
};

struct service_options {
  std::string token;                 // empty: no token required
  uint64_t max_memory = 0;           // bytes of buffers per session, 0: no limit
  uint32_t max_handles = 4096;       // backends + buffers + graphs per session
  size_t max_sessions = 64;          // 0: no limit
  std::vector<bp_device *> devices;  // what clients see, in this order
  std::string server_id;             // stable across restarts of this server
};

// The state of one SetTensor stream between its messages.
struct set_stream {
  std::shared_ptr<session> s;
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
  // GetTensor: |write| sends one chunk; false when the peer is gone.
  grpc::Status get_tensor(const call_meta &m, const pb::GetTensorRequest &req,
                          const std::function<bool(const pb::DataChunk &)> &write);
  grpc::Status copy_buffer(const call_meta &m, const pb::CopyBufferRequest &req);

  grpc::Status graph_register(const call_meta &m, const pb::GraphRegisterRequest &req, pb::Handle *reply);
  grpc::Status graph_compute(const call_meta &m, const pb::Handle &req);
  grpc::Status graph_free(const call_meta &m, const pb::Handle &req);

  // UNAUTHENTICATED unless the call carries the token (when there is one).
  grpc::Status authorize(const call_meta &m) const;
  // Closes sessions with no lifeline |grace| after their Hello.
  size_t reap(std::chrono::steady_clock::duration grace);
  // Refuses new calls (UNAVAILABLE) and ends every lifeline.
  void begin_shutdown();
  // begin_shutdown, then frees every session (call once no handler runs).
  void shutdown();
  bool stopping() const { return stopping_.load(); }
  size_t session_count() { return sessions_.size(); }
  const service_options &options() const { return opt_; }

 private:
  // Token, session lookup and lock: the preamble of every call but Hello.
  grpc::Status enter(const call_meta &m, std::shared_ptr<session> *s);
  void notify_all();

  service_options opt_;
  session_table sessions_;
  std::atomic<bool> stopping_{false};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
};

}  // namespace bp::remote::server
