// session.hpp: what one client owns on the server, and the table of live
// sessions. A session is named by 128 random bits and belongs to the
// connection that opened it; every object it holds is a random 64-bit
// handle in its own maps. A handle from another session or a freed one is
// simply absent (NOT_FOUND), and the address behind it is never sent.
#pragma once

#include <backplane/backplane.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace bp::remote::server {

using clock = std::chrono::steady_clock;

// A buffer and a byte-addressable tensor spanning it (an f16 1-D tensor
// placed at 0), through which bytes are written and read at any offset.
struct remote_buffer {
  bp_buffer *buffer = nullptr;
  bp_context *ctx = nullptr;  // holds |bytes|
  bp_tensor *bytes = nullptr;
  uint64_t size = 0;       // what the client asked for: every range is checked against it
  uint64_t allocated = 0;  // what was allocated (size rounded up to even)
  uint32_t device = 0;
  ~remote_buffer();
};

struct remote_backend {
  bp_backend *backend = nullptr;
  uint32_t device = 0;
  uint32_t threads = 0;  // worker threads it starts (threads= minus the caller's; 0 without threads=)
  ~remote_backend();
};

// A registered graph: rebuilt in its own context, re-run by id.
struct remote_graph {
  uint64_t backend = 0;        // the backend handle it runs on
  std::set<uint64_t> buffers;  // buffer handles its tensors live in
  uint64_t memory = 0;         // what it is charged against the session's graph memory
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_graph_plan *plan = nullptr;  // when the backend has plans
  // Each node's position in GraphRegisterRequest.nodes (the first, for a
  // node listed twice): how a reply names the nodes whose times it carries.
  std::unordered_map<const bp_tensor *, uint32_t> node_index;
  ~remote_graph();
};

// glibc keeps freed heap pages resident, each thread's arena its own, and
// gRPC runs calls on many threads: a graph's or a session's freed memory
// would stay in the resident set for good. Hands free pages back to the OS
// (malloc_trim); called when a session closes, when a graph of at least
// k_trim_bytes goes and after a registration of at least k_trim_tensors.
void release_freed_heap();
inline constexpr uint64_t k_trim_bytes = uint64_t{1} << 20;
inline constexpr int k_trim_tensors = 4096;

// Kinds of refusal a session is told about every time but the log records
// once per session, so a misbehaving client cannot flood it.
enum class refusal : uint32_t { calls, threads, graph_memory, memory, handles, stream_idle, count };
const char *refusal_name(refusal r);

struct session {
  std::string id;    // 32 hex digits (128 random bits)
  std::string peer;  // the connection that opened it (its id, peer address and TLS identity)
  clock::time_point created;
  std::mutex mu;                         // every handler holds it while it uses the session's objects
  bool closed = false;                   // Goodbye, lifeline end, reaping or shutdown
  bool lifeline = false;                 // a Lifeline stream is attached
  uint64_t memory_used = 0;              // bytes of buffers
  uint64_t graph_memory = 0;             // bytes charged for registered graphs
  std::map<uint32_t, uint32_t> threads;  // device index -> worker threads its backends started
  // Calls and streams running now (the Lifeline excluded): bounded per
  // session so that one client cannot hold the server's whole thread pool.
  std::atomic<uint32_t> in_flight{0};
  std::atomic<uint32_t> refusals_logged{0};  // bit per refusal kind
  std::atomic<bool> foreign_logged{false};   // a call from another connection named it
  // Calls made in the session (Hello and the Lifeline excluded): logged when
  // it ends, so an operator sees what a workload costs in round trips.
  std::atomic<uint64_t> calls{0};
  std::map<uint64_t, std::unique_ptr<remote_backend>> backends;
  std::map<uint64_t, std::unique_ptr<remote_buffer>> buffers;
  std::map<uint64_t, std::unique_ptr<remote_graph>> graphs;

  size_t handle_count() const { return backends.size() + buffers.size() + graphs.size(); }
  // A fresh random non-zero handle not used in this session; 0 when the
  // kernel gives no randomness.
  uint64_t new_handle();
  // True the first time this session meets refusal |r|: log it then.
  bool first_refusal(refusal r);
  // Frees one graph, backend or buffer and returns what it was charged.
  void erase_graph(uint64_t h);
  void erase_backend(uint64_t h);
  void erase_buffer(uint64_t h);
  // Frees every graph that runs on |backend| or uses |buffer| (0: none):
  // their tensors must not outlive the memory they point into.
  void drop_graphs_using(uint64_t backend, uint64_t buffer);
  // Frees everything, graphs first, then buffers, then backends.
  void free_all();
  ~session() { free_all(); }
};

// The live sessions. Handlers take a shared_ptr: a session removed while a
// call runs is freed when that call returns.
class session_table {
 public:
  explicit session_table(size_t max_sessions) : max_(max_sessions) {}
  // A new session owned by |peer|. nullptr with |why| set when
  // max_sessions are open or no random id could be made.
  std::shared_ptr<session> open(const std::string &peer, std::string *why);
  // The session |id| when |peer| opened it. nullptr otherwise, with
  // *foreign set when it exists but belongs to another connection.
  std::shared_ptr<session> find(const std::string &id, const std::string &peer, bool *foreign = nullptr);
  // True the first time a call from another connection names |id|.
  bool first_foreign_call(const std::string &id);
  // True while |id| is open (for the lifeline's own wait).
  bool alive(const std::string &id);
  // Removes |id| (closed = true); its objects go when the last user lets
  // go. Large frees are handed back to the OS so an idle server is small.
  void close(const std::string &id);
  // Closes sessions that have no lifeline attached |grace| after Hello.
  size_t reap(clock::time_point now, clock::duration grace);
  void close_all();
  size_t size();

 private:
  std::mutex mu_;
  size_t max_;
  std::map<std::string, std::shared_ptr<session>> sessions_;
};

}  // namespace bp::remote::server
