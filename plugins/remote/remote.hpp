// remote.hpp: objects shared between the files of the remote plugin.
//
// Objects: plugin_state (init) owns one server_conn per address in
// BP_REMOTE (found at enumerate: a channel, a session opened by Hello and
// its Lifeline reader thread) and one device_state per device a server
// serves. Buffers and backends hold the session they were made in: a
// session that was lost stays lost, and everything made in it is refused
// with DEVICE_LOST; a later backend or buffer of the device opens a new
// session when the server answers again.
// Everything here is internal: only plugin.cpp exports symbols.
#ifndef BP_PLUGIN_REMOTE_REMOTE_HPP_
#define BP_PLUGIN_REMOTE_REMOTE_HPP_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backplane/plugin.h"
#include "memory_window.hpp"
#include "plugin_common.hpp"
#include "remote.grpc.pb.h"

namespace bp::remote_plugin {

namespace pb = ::backplane::remote::v1;

// The defaults of the per-call deadline and the transfer chunk (the
// parameter schema's defaults too).
inline constexpr int64_t k_default_timeout_ms = 10000;
inline constexpr int64_t k_default_chunk_bytes = int64_t{1} << 20;

// What the environment says (BP_REMOTE*), read once at enumerate.
struct client_config {
  std::vector<std::string> servers;  // host:port, in order
  std::string token;                 // contents of BP_REMOTE_TOKEN_FILE (trailing newline cut)
  std::string token_file;
  std::string tls_ca;  // PEM contents of BP_REMOTE_TLS_CA ("" = plaintext)
  std::string tls_ca_file;
  std::string tls_cert, tls_key;         // optional client certificate (BP_REMOTE_TLS_CERT / _KEY)
  int64_t timeout_ms = 10000;            // per-call deadline (BP_REMOTE_TIMEOUT_MS)
  int64_t connect_timeout_ms = 3000;     // the first call's deadline
  size_t chunk_bytes = size_t{1} << 20;  // BP_REMOTE_CHUNK_BYTES
};
// Reads BP_REMOTE, BP_REMOTE_TOKEN_FILE, BP_REMOTE_TLS_CA, ... into |out|.
// INVALID_ARGUMENT naming the variable when one cannot be used.
bp_status read_config(client_config *out, bp_error *err);

struct server_conn;

// One session: what Hello answered and the calls in flight. Lost once the
// Lifeline breaks or a call finds the server gone; never found again.
struct session {
  server_conn *server = nullptr;
  std::string id_text;  // the server's session id (hex), for the metadata
  pb::HelloReply hello;

  std::atomic<bool> lost{false};
  std::atomic<bool> closing{false};  // being closed by this client: no error log
  std::mutex mu;                     // guards reason and calls
  std::string reason;
  std::set<grpc::ClientContext *> calls;  // cancelled when the session is lost
  // Calls made in this session (Hello and the Lifeline excluded), logged at
  // INFO when it closes: how many round trips a workload costs.
  std::atomic<uint64_t> call_count{0};

  // The Lifeline reader.
  grpc::ClientContext lifeline_ctx;
  std::thread lifeline;

  // Marks the session lost with |why| (the first reason sticks) and cancels
  // every call in flight. Thread-safe, idempotent.
  void mark_lost(const std::string &why);
  std::string lost_reason();
  ~session();
};

struct server_conn {
  const bp_host_api *host = nullptr;
  std::string address;
  const client_config *config = nullptr;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Remote::Stub> stub;
  std::string server_id;
  std::mutex mu;  // guards current
  std::shared_ptr<session> current;
};

// Opens |conn|'s channel (TLS when a CA is configured) and a session:
// Hello under the short connect deadline, then the Lifeline reader. A
// refusal (token, version, TLS mismatch, nothing listening) names the cause.
bp_status server_connect(server_conn *conn, bp_error *err);
// The session to use now: the current one, or (|reopen|) a new one when the
// current one was lost and the server answers again (same server id).
bp_status server_session(server_conn *conn, bool reopen, std::shared_ptr<session> *out, bp_error *err);
// Says goodbye (short deadline) and stops the Lifeline reader.
void server_close(server_conn *conn);

// A call in flight: its ClientContext with the deadline and the session's
// metadata, registered with the session so a loss cancels it.
class call {
 public:
  // |extra_ms| lengthens the deadline (large streamed transfers).
  call(session *s, int64_t timeout_ms, int64_t extra_ms = 0);
  ~call();
  call(const call &) = delete;
  call &operator=(const call &) = delete;
  grpc::ClientContext *ctx() { return &ctx_; }

 private:
  session *s_;
  grpc::ClientContext ctx_;
};

// The status |st| of RPC |what| on session |s| in Backplane terms, with
// |err| filled; UNAVAILABLE and DEADLINE_EXCEEDED mark the session lost.
bp_status rpc_failed(session *s, const grpc::Status &st, const char *what, bp_error *err);
// DEVICE_LOST with the reason when |s| was lost, else BP_OK.
bp_status session_check(session *s, bp_error *err);

struct plugin_state;

struct device_state {
  plugin_state *plugin = nullptr;
  server_conn *server = nullptr;
  pb::DeviceInfo info;        // as the server reported it
  uint32_t remote_index = 0;  // the device's index on its server
  std::string name, description, id;
  bp_device_type type = BP_DEVICE_TYPE_CPU;
  uint32_t caps = 0;
  size_t alignment = 64, max_size = 0;
};

struct plugin_state {
  const bp_host_api *host = nullptr;
  plugins::discovery found;
  client_config config;
  std::vector<std::unique_ptr<server_conn>> servers;
  std::vector<std::unique_ptr<device_state>> devices;
  // Opaque, never dereferenced base addresses handed out by buffers: each
  // buffer gets its own aligned range so offsets are data - base.
  std::atomic<uint64_t> next_base{uint64_t(1) << 44};
  ~plugin_state();
};

// plugin.cpp
const bp_plugin_i *plugin_table();

// device.cpp
bp_status enumerate_devices(plugin_state *plugin, bp_error *err);
extern const bp_device_i device_iface;

// buffer.cpp
struct remote_buffer {
  uint32_t magic = 0x42524d42u;  // tells our buffers from anyone else's
  device_state *dev = nullptr;
  std::shared_ptr<session> sess;
  uint64_t handle = 0;
  size_t size = 0;
  char *base = nullptr;
};
bp_buffer_type_ref buffer_type_of(device_state *dev);
extern const bp_buffer_type_i &buffer_type_iface;
// The remote_buffer holding |t|, or nullptr when it is not one of ours.
remote_buffer *buffer_of(const bp_tensor *t);
// Streamed transfers, shared by the buffer and the backend's async slots.
bp_status write_bytes(remote_buffer *b, uint64_t at, const void *data, size_t size, size_t chunk_bytes,
                      int64_t timeout_ms, bp_error *err);
bp_status read_bytes(remote_buffer *b, uint64_t at, void *data, size_t size, size_t chunk_bytes, int64_t timeout_ms,
                     bp_error *err);
// Extra deadline for |bytes| of data: 1 ms per 64 KiB (about 64 MB/s at worst).
inline int64_t transfer_extra_ms(size_t bytes) { return static_cast<int64_t>(bytes >> 16); }

// backend.cpp
struct backend_options {
  int64_t timeout_ms = 10000;
  size_t chunk_bytes = size_t{1} << 20;
};
bp_status backend_create(device_state *dev, const backend_options &opt, bp_backend_ref *out, bp_error *err);
bp_status event_create(device_state *dev, bp_event_ref *out, bp_error *err);

}  // namespace bp::remote_plugin

#endif  // BP_PLUGIN_REMOTE_REMOTE_HPP_
