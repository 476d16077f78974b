// session.hpp: what one client owns on the server, and the table of live
// sessions. Every object a client names is a random 64-bit handle in its
// own session's maps; a handle from another session or a freed one is
// simply absent (NOT_FOUND), and the address behind it is never sent.
#pragma once

#include <backplane/backplane.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
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
  ~remote_backend();
};

// A registered graph: rebuilt in its own context, re-run by id.
struct remote_graph {
  uint64_t backend = 0;        // the backend handle it runs on
  std::set<uint64_t> buffers;  // buffer handles its tensors live in
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_graph_plan *plan = nullptr;  // when the backend has plans
  ~remote_graph();
};

struct session {
  uint64_t id = 0;
  clock::time_point created;
  std::mutex mu;             // every handler holds it while it uses the session's objects
  bool closed = false;       // Goodbye, lifeline end, reaping or shutdown
  bool lifeline = false;     // a Lifeline stream is attached
  uint64_t memory_used = 0;  // bytes of buffers
  // Calls made in the session (Hello and the Lifeline excluded): logged when
  // it ends, so an operator sees what a workload costs in round trips.
  std::atomic<uint64_t> calls{0};
  std::map<uint64_t, std::unique_ptr<remote_backend>> backends;
  std::map<uint64_t, std::unique_ptr<remote_buffer>> buffers;
  std::map<uint64_t, std::unique_ptr<remote_graph>> graphs;

  size_t handle_count() const { return backends.size() + buffers.size() + graphs.size(); }
  // A fresh non-zero handle not used in this session.
  uint64_t new_handle();
  // Frees every graph that runs on |backend| or uses |buffer| (0: none):
  // their tensors must not outlive the memory they point into.
  void drop_graphs_using(uint64_t backend, uint64_t buffer);
  // Frees everything, graphs first, then buffers, then backends.
  void free_all();
  ~session() { free_all(); }

 private:
  std::mt19937_64 rng_{std::random_device{}()};
};

// The live sessions. Handlers take a shared_ptr: a session removed while a
// call runs is freed when that call returns.
class session_table {
 public:
  explicit session_table(size_t max_sessions) : max_(max_sessions) {}
  // nullptr when max_sessions are open.
  std::shared_ptr<session> open();
  std::shared_ptr<session> find(uint64_t id);
  // Removes |id| (closed = true); its objects go when the last user lets go.
  void close(uint64_t id);
  // Closes sessions that have no lifeline attached |grace| after Hello.
  size_t reap(clock::time_point now, clock::duration grace);
  void close_all();
  size_t size();

 private:
  std::mutex mu_;
  size_t max_;
  std::map<uint64_t, std::shared_ptr<session>> sessions_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace bp::remote::server
