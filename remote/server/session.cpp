// session.cpp: sessions, their objects and the session table (session.hpp).
#include "session.hpp"

#include <malloc.h>

#include "secure_random.hpp"

namespace bp::remote::server {

remote_buffer::~remote_buffer() {
  bp_context_free(ctx);
  bp_buffer_free(buffer);
}

remote_backend::~remote_backend() { bp_backend_free(backend); }

remote_graph::~remote_graph() {
  bp_graph_plan_free(plan);  // waits for a run in flight
  bp_graph_free(graph);
  bp_context_free(ctx);
}

const char *refusal_name(refusal r) {
  switch (r) {
    case refusal::calls:
      return "calls in flight (--max-session-calls)";
    case refusal::threads:
      return "worker threads (--max-threads)";
    case refusal::graph_memory:
      return "graph memory (--max-graph-memory)";
    case refusal::memory:
      return "buffer memory (--max-memory)";
    case refusal::handles:
      return "handles (--max-handles)";
    case refusal::stream_idle:
      return "idle stream (--stream-idle-timeout)";
    case refusal::count:
      break;
  }
  return "?";
}

uint64_t session::new_handle() {
  for (int tries = 0; tries < 8; ++tries) {
    const uint64_t h = secure_random_u64();
    if (h == 0) return 0;
    if (!backends.count(h) && !buffers.count(h) && !graphs.count(h)) return h;
  }
  return 0;
}

bool session::first_refusal(refusal r) {
  const uint32_t bit = 1u << static_cast<uint32_t>(r);
  return (refusals_logged.fetch_or(bit) & bit) == 0;
}

void release_freed_heap() { malloc_trim(0); }

void session::erase_graph(uint64_t h) {
  auto it = graphs.find(h);
  if (it == graphs.end()) return;
  const uint64_t freed = it->second->memory;
  graph_memory -= freed;
  graphs.erase(it);
  if (freed >= k_trim_bytes) release_freed_heap();
}

void session::erase_backend(uint64_t h) {
  auto it = backends.find(h);
  if (it == backends.end()) return;
  threads[it->second->device] -= it->second->threads;
  backends.erase(it);
}

void session::erase_buffer(uint64_t h) {
  auto it = buffers.find(h);
  if (it == buffers.end()) return;
  memory_used -= it->second->allocated;
  buffers.erase(it);
}

void session::drop_graphs_using(uint64_t backend, uint64_t buffer) {
  std::vector<uint64_t> doomed;
  for (const auto &[h, g] : graphs) {
    if ((backend != 0 && g->backend == backend) || (buffer != 0 && g->buffers.count(buffer))) doomed.push_back(h);
  }
  for (uint64_t h : doomed) erase_graph(h);
}

void session::free_all() {
  graphs.clear();  // plans before their backends, tensors before their buffers
  graph_memory = 0;
  buffers.clear();
  memory_used = 0;
  for (auto &[h, be] : backends) bp_backend_synchronize(be->backend);
  backends.clear();
  threads.clear();
}

std::shared_ptr<session> session_table::open(const std::string &peer, std::string *why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_ != 0 && sessions_.size() >= max_) {
    *why = "bp-serve already serves " + std::to_string(max_) + " sessions (--max-clients): try again later";
    return nullptr;
  }
  auto s = std::make_shared<session>();
  do {
    s->id = secure_random_hex128();
    if (s->id.empty()) {
      *why = "the kernel gave no random bytes for a session id (getrandom failed)";
      return nullptr;
    }
  } while (sessions_.count(s->id));
  s->peer = peer;
  s->created = clock::now();
  sessions_.emplace(s->id, s);
  return s;
}

std::shared_ptr<session> session_table::find(const std::string &id, const std::string &peer, bool *foreign) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  if (it->second->peer != peer) {
    if (foreign) *foreign = true;
    return nullptr;
  }
  return it->second;
}

bool session_table::first_foreign_call(const std::string &id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  return it != sessions_.end() && !it->second->foreign_logged.exchange(true);
}

bool session_table::alive(const std::string &id) {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.count(id) != 0;
}

void session_table::close(const std::string &id) {
  std::shared_ptr<session> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    s = std::move(it->second);
    sessions_.erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->closed = true;
    s->free_all();
  }
  s.reset();
  // A closed session's buffers and graph contexts can be gigabytes of freed
  // heap. Hand them back now, so an idle server is small again (a call
  // still holding the session frees the rest when it returns; the next
  // close trims those).
  release_freed_heap();
}

size_t session_table::reap(clock::time_point now, clock::duration grace) {
  std::vector<std::string> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &[id, s] : sessions_) {
      std::unique_lock<std::mutex> slock(s->mu, std::try_to_lock);
      if (slock.owns_lock() && !s->lifeline && now - s->created > grace) stale.push_back(id);
    }
  }
  for (const std::string &id : stale) close(id);
  return stale.size();
}

void session_table::close_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &[id, s] : sessions_) ids.push_back(id);
  }
  for (const std::string &id : ids) close(id);
}

size_t session_table::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace bp::remote::server
