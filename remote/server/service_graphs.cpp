// service_graphs.cpp: backends and graphs (service_core.hpp).
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "backplane/trace.h"

#include "graph_cost.hpp"
#include "graph_rebuild.hpp"
#include "service_core.hpp"
#include "service_util.hpp"

namespace bp::remote::server {
namespace {

constexpr size_t k_max_backend_params = 32;
// How many nodes GraphRegister builds between two looks at the client's
// cancellation and deadline.
constexpr int k_cancel_check_nodes = 256;

// The Param list as a backend parameter string "k=v,k=v", refusing
// anything that could smuggle another key or spec in. |skip| leaves out
// one key (threads=, which the server writes itself).
bool params_text(const pb::BackendOpenRequest &req, const char *skip, std::string *out, std::string *why) {
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
    if (skip && p.key() == skip) continue;
    if (!out->empty()) *out += ",";
    *out += p.key() + "=" + p.value();
  }
  return true;
}

// True when |dev|'s plugin takes a threads= parameter (cpu, blas).
bool takes_threads(bp_device *dev) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (bp_device_describe(dev, &info) != BP_OK || info.plugin == nullptr) return false;
  for (size_t i = 0; i < bp_plugin_param_count(info.plugin); ++i) {
    const bp_param_info *p = bp_plugin_param(info.plugin, i);
    if (p && p->name && std::strcmp(p->name, "threads") == 0 && p->type == BP_PARAM_INT) return true;
  }
  return false;
}

}  // namespace

grpc::Status service_core::plan_threads(session &s, uint32_t device, const pb::BackendOpenRequest &req,
                                        std::string *params, uint32_t *workers) {
  *workers = 0;
  if (!takes_threads(opt_.devices[device])) return grpc::Status::OK;
  // threads=T computes on the calling thread and T - 1 workers the backend
  // starts; those workers are what the session is charged. threads=0 and no
  // threads= both mean "one per core" to the plugins: the server makes the
  // number explicit, as large as what the session has left allows, so a
  // backend opened without threads= always fits (at worst with threads=1,
  // which starts none).
  uint64_t asked = 0;
  for (const pb::Param &p : req.params()) {
    if (p.key() != "threads") continue;
    const std::string &v = p.value();
    if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) {
      return invalid("BackendOpen: threads='" + v + "' is not a whole number of threads");
    }
    asked = std::stoull(v);
  }
  const uint32_t used = s.threads[device];
  const uint32_t left = used >= opt_.max_threads ? 0 : opt_.max_threads - used;
  const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t threads = asked != 0 ? asked : std::min<uint64_t>(cores, uint64_t{left} + 1);
  if (threads - 1 > left) {
    const std::string why = "BackendOpen: threads=" + std::to_string(threads) + " starts " +
                            std::to_string(threads - 1) + " worker threads, but this session's backends on device " +
                            std::to_string(device) + " already run " + std::to_string(used) + " of the " +
                            std::to_string(opt_.max_threads) +
                            " allowed (--max-threads): free a backend or ask for fewer (threads=N)";
    log_refusal(s, refusal::threads, why);
    return exhausted(why);
  }
  if (!params->empty()) *params += ",";
  *params += "threads=" + std::to_string(threads);
  *workers = static_cast<uint32_t>(threads - 1);
  return grpc::Status::OK;
}

grpc::Status service_core::check_graph_memory(session &s, int tensors, uint64_t cost, const char *qualifier) {
  if (opt_.max_graph_memory == 0 || s.graph_memory + cost <= opt_.max_graph_memory) return grpc::Status::OK;
  const std::string why = "GraphRegister: a graph of " + std::to_string(tensors) + " tensors holds " + qualifier +
                          std::to_string(cost) + " bytes of server memory, and the session's graphs hold " +
                          std::to_string(s.graph_memory) + " of the " + std::to_string(opt_.max_graph_memory) +
                          " allowed (--max-graph-memory): free graphs first";
  log_refusal(s, refusal::graph_memory, why);
  return exhausted(why);
}

grpc::Status service_core::backend_open(const call_meta &m, const pb::BackendOpenRequest &req, pb::Handle *reply) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (req.device() >= opt_.devices.size()) return no_device(req.device(), opt_.devices.size());
    std::string params, why;
    if (!params_text(req, "threads", &params, &why)) return invalid("BackendOpen: " + why);
    if (grpc::Status st = check_handles(s); !st.ok()) return st;
    auto be = std::make_unique<remote_backend>();
    be->device = req.device();
    if (grpc::Status st = plan_threads(s, req.device(), req, &params, &be->threads); !st.ok()) return st;
    if (bp_backend_new_on_device(opt_.devices[req.device()], params.c_str(), &be->backend) != BP_OK) {
      return from_last_error("BackendOpen: ");
    }
    const uint64_t h = s.new_handle();
    if (h == 0) return no_randomness();
    s.threads[be->device] += be->threads;
    s.backends.emplace(h, std::move(be));
    reply->set_id(h);
    return grpc::Status::OK;
  });
}

grpc::Status service_core::backend_free(const call_meta &m, const pb::Handle &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (!find_backend(s, req.id())) return no_backend(req.id());
    s.drop_graphs_using(req.id(), 0);
    s.erase_backend(req.id());
    return grpc::Status::OK;
  });
}

grpc::Status service_core::backend_synchronize(const call_meta &m, const pb::Handle &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    remote_backend *be = find_backend(s, req.id());
    if (!be) return no_backend(req.id());
    if (bp_backend_synchronize(be->backend) != BP_OK) return from_last_error("BackendSynchronize: ");
    return grpc::Status::OK;
  });
}

grpc::Status service_core::supports_op(const call_meta &m, const pb::SupportsOpRequest &req,
                                       pb::SupportsOpReply *reply) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (req.tensors_size() == 0) return invalid("SupportsOp: no tensors: the node comes last");
    remote_backend *be = find_backend(s, req.backend());
    if (!be) return no_backend(req.backend());
    rebuilt_graph g;
    if (grpc::Status st = rebuild_tensors(s, req.tensors(), false, &g); !st.ok()) return st;
    reply->set_supported(bp_backend_supports_op(be->backend, g.tensors.back()));
    bp_context_free(g.ctx);
    return grpc::Status::OK;
  });
}

grpc::Status service_core::graph_register(const call_meta &m, const pb::GraphRegisterRequest &req, pb::Handle *reply) {
  const grpc::Status st = register_graph(m, req, reply);
  // A large registration freed its scratch (and, refused, its whole graph)
  // on this thread's arena: give those pages back.
  if (req.tensors_size() >= k_trim_tensors) release_freed_heap();
  return st;
}

grpc::Status service_core::register_graph(const call_meta &m, const pb::GraphRegisterRequest &req, pb::Handle *reply) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (req.nodes_size() == 0) return invalid("GraphRegister: the graph has no nodes");
    for (int i = 0; i < req.nodes_size(); ++i) {
      if (req.nodes(i) >= static_cast<uint32_t>(req.tensors_size())) {
        return invalid("GraphRegister: nodes[" + std::to_string(i) + "] is tensor " + std::to_string(req.nodes(i)) +
                       " but the description has " + std::to_string(req.tensors_size()) + " tensors");
      }
    }
    remote_backend *be = find_backend(s, req.backend());
    if (!be) return no_backend(req.backend());
    if (grpc::Status st = check_handles(s); !st.ok()) return st;
    // The least the graph can hold is checked before anything is built, so
    // a graph that cannot fit costs nothing; what it really holds is
    // charged once it is built (graph_cost.hpp).
    const uint64_t floor =
        graph_cost_floor(static_cast<uint64_t>(req.tensors_size()), static_cast<uint64_t>(req.nodes_size()));
    if (grpc::Status st = check_graph_memory(s, req.tensors_size(), floor, "at least "); !st.ok()) return st;
    rebuilt_graph r;
    if (grpc::Status st = rebuild_tensors(s, req.tensors(), true, &r); !st.ok()) return st;
    auto g = std::make_unique<remote_graph>();
    g->ctx = r.ctx;  // owned by g from here
    g->backend = req.backend();
    g->buffers = r.buffers;
    for (uint64_t h : r.buffers) {
      bp_buffer_type *buft = bp_buffer_buffer_type(s.buffers.at(h)->buffer);
      if (!bp_backend_supports_buft(be->backend, buft)) {
        return invalid(std::string("GraphRegister: buffer handle ") + std::to_string(h) + " is memory of type '" +
                       bp_buffer_type_name(buft) + "', which backend " + bp_backend_name(be->backend) +
                       " cannot use: allocate on the backend's device");
      }
    }
    g->graph = bp_graph_new(g->ctx, 2 * static_cast<size_t>(req.tensors_size()) + 8);
    if (g->graph == nullptr) return from_last_error("GraphRegister: ");
    for (int i = 0; i < req.nodes_size(); ++i) {
      // A client that gave up (cancel, deadline, lost connection) stops the
      // work it asked for, and lets go of its session's lock.
      if (i % k_cancel_check_nodes == 0 && m.cancelled && m.cancelled()) {
        return {grpc::StatusCode::CANCELLED, "GraphRegister: the client cancelled or its deadline passed after " +
                                                 std::to_string(i) + " of " + std::to_string(req.nodes_size()) +
                                                 " nodes"};
      }
      const uint32_t idx = req.nodes(i);
      if (bp_graph_build(g->graph, r.tensors[idx]) != BP_OK) {
        return from_last_error("GraphRegister: node " + std::to_string(idx) + ": ");
      }
      g->node_index.emplace(r.tensors[idx], static_cast<uint32_t>(i));
    }
    if (bp_graph_validate(g->graph) != BP_OK) return from_last_error("GraphRegister: ");
    // A plan where the backend has them; UNIMPLEMENTED means none (or a
    // node it cannot run, which the compute reports by name).
    if (bp_graph_plan_new(be->backend, g->graph, &g->plan) != BP_OK) {
      g->plan = nullptr;
      if (bp_last_status() != BP_ERR_UNIMPLEMENTED) return from_last_error("GraphRegister: ");
    }
    g->memory = graph_cost(*g);
    if (grpc::Status st = check_graph_memory(s, req.tensors_size(), g->memory, ""); !st.ok()) return st;
    const uint64_t h = s.new_handle();
    if (h == 0) return no_randomness();
    s.graph_memory += g->memory;
    s.graphs.emplace(h, std::move(g));
    reply->set_id(h);
    return grpc::Status::OK;
  });
}

uint64_t service_core::graph_memory(const call_meta &m) {
  uint64_t bytes = 0;
  with_session(m, [&](session &s) {
    bytes = s.graph_memory;
    return grpc::Status::OK;
  });
  return bytes;
}

grpc::Status service_core::graph_compute(const call_meta &m, const pb::GraphComputeRequest &req,
                                         pb::GraphComputeReply *reply) {
  return with_session(m, [&](session &s) -> grpc::Status {
    auto it = s.graphs.find(req.id());
    if (it == s.graphs.end()) {
      return not_found("graph handle " + std::to_string(req.id()) +
                       " is unknown in this session (freed, or dropped with its backend or a buffer it used)");
    }
    remote_graph &g = *it->second;
    remote_backend *be = find_backend(s, g.backend);
    if (!be) return no_backend(g.backend);
    // A traced client asks for node times: captured for this call only, so
    // the server records nothing else and writes no trace file.
    const bool timed = reply != nullptr && req.node_times() && bp_trace_capture_begin(be->backend) == BP_OK;
    const uint64_t start = timed ? bp_trace_clock_ns() : 0;
    bp_status st = BP_OK;
    if (g.plan) {
      st = bp_graph_plan_compute_async(g.plan);
      if (st == BP_OK) st = bp_backend_synchronize(be->backend);
    } else {
      st = bp_backend_graph_compute(be->backend, g.graph);
    }
    if (timed) {
      const uint64_t end = bp_trace_clock_ns();
      const bp_status compute_status = st;
      const std::string compute_error = st == BP_OK ? std::string() : bp_last_error();
      size_t n = 0;
      std::vector<bp_trace_node_time> times(g.node_index.size() + 16);
      if (bp_trace_capture_end(be->backend, times.data(), times.size(), &n) == BP_OK) {
        reply->set_duration_ns(end - start);
        for (size_t i = 0; i < std::min(n, times.size()); ++i) {
          auto at = g.node_index.find(times[i].node);
          if (at == g.node_index.end()) continue;
          // A device clock placed a little outside the call: kept inside it.
          const uint64_t b = std::clamp(times[i].begin_ns, start, end), e = std::clamp(times[i].end_ns, b, end);
          pb::NodeTime *t = reply->add_nodes();
          t->set_node(at->second);
          t->set_begin_ns(b - start);
          t->set_end_ns(e - start);
        }
      }
      if (compute_status != BP_OK) return from_bp(compute_status, "GraphCompute: " + compute_error);
    }
    if (st != BP_OK) return from_last_error("GraphCompute: ");
    return grpc::Status::OK;
  });
}

grpc::Status service_core::graph_free(const call_meta &m, const pb::Handle &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (!s.graphs.count(req.id())) {
      return not_found("graph handle " + std::to_string(req.id()) + " is unknown in this session");
    }
    s.erase_graph(req.id());
    return grpc::Status::OK;
  });
}

}  // namespace bp::remote::server
