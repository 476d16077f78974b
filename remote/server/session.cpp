// session.cpp: sessions, their objects and the session table (session.hpp).
#include "session.hpp"

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

uint64_t session::new_handle() {
  for (;;) {
    const uint64_t h = rng_();
    if (h != 0 && !backends.count(h) && !buffers.count(h) && !graphs.count(h)) return h;
  }
}

void session::drop_graphs_using(uint64_t backend, uint64_t buffer) {
  for (auto it = graphs.begin(); it != graphs.end();) {
    const remote_graph &g = *it->second;
    if ((backend != 0 && g.backend == backend) || (buffer != 0 && g.buffers.count(buffer))) {
      it = graphs.erase(it);
    } else {
      ++it;
    }
  }
}

void session::free_all() {
  graphs.clear();  // plans before their backends, tensors before their buffers
  buffers.clear();
  memory_used = 0;
  for (auto &[h, be] : backends) bp_backend_synchronize(be->backend);
  backends.clear();
}

std::shared_ptr<session> session_table::open() {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_ != 0 && sessions_.size() >= max_) return nullptr;
  auto s = std::make_shared<session>();
  do {
    s->id = rng_();
  } while (s->id == 0 || sessions_.count(s->id));
  s->created = clock::now();
  sessions_.emplace(s->id, s);
  return s;
}

std::shared_ptr<session> session_table::find(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

void session_table::close(uint64_t id) {
  std::shared_ptr<session> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    s = std::move(it->second);
    sessions_.erase(it);
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->closed = true;
  s->free_all();
}

size_t session_table::reap(clock::time_point now, clock::duration grace) {
  std::vector<uint64_t> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &[id, s] : sessions_) {
      std::unique_lock<std::mutex> slock(s->mu, std::try_to_lock);
      if (slock.owns_lock() && !s->lifeline && now - s->created > grace) stale.push_back(id);
    }
  }
  for (uint64_t id : stale) close(id);
  return stale.size();
}

void session_table::close_all() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &[id, s] : sessions_) ids.push_back(id);
  }
  for (uint64_t id : ids) close(id);
}

size_t session_table::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace bp::remote::server
