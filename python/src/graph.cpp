// graph.cpp: Graph (bp_graph) and its computation through the scheduler
// (bp_sched_*), with the schedule readable afterwards.
#include <algorithm>
#include <map>
#include <set>

#include "tensor_io.hpp"

namespace bppy {
namespace {

struct GraphH {
  bp_graph *g = nullptr;
  size_t max_nodes = 0;
  std::vector<CtxP> ctxs;  // every context its tensors may live in
  CtxP umbrella;           // an empty context that keeps all of them, for wrapping nodes
  std::vector<Tensor> outputs;
  std::mutex mu;  // one compute of this graph at a time
  std::shared_ptr<SchedH> sched;
  std::string spec;  // the spec string the scheduler's backends came from
  bool allocated = false;
  ~GraphH() { bp_graph_free(g); }
};

struct Graph {
  std::shared_ptr<GraphH> h;
};

struct Split {
  std::string backend;
  size_t first_node, n_nodes, n_inputs, n_plans;
  uint64_t bytes_copied;
};

bool is_cpu(bp_backend *be) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  return bp_device_describe(bp_backend_device(be), &info) == BP_OK && info.type == BP_DEVICE_TYPE_CPU;
}

Graph make_graph(const std::vector<Tensor> &outputs, size_t max_nodes) {
  if (outputs.empty()) fail(BP_ERR_INVALID_ARGUMENT, "Graph: name at least one output tensor");
  auto h = std::make_shared<GraphH>();
  h->max_nodes = max_nodes ? max_nodes : 4096;
  h->outputs = outputs;
  std::set<Ctx *> seen;
  std::vector<CtxP> todo;
  for (const auto &o : outputs) todo.push_back(o.ctx);
  while (!todo.empty()) {
    CtxP c = todo.back();
    todo.pop_back();
    if (!seen.insert(c.get()).second) continue;
    h->ctxs.push_back(c);
    for (const auto &d : c->deps) todo.push_back(d);
  }
  h->umbrella = new_ctx(1);
  for (const auto &c : h->ctxs) h->umbrella->add_dep(c);
  h->g = check_ptr(bp_graph_new(outputs[0].ctx->ctx, h->max_nodes));
  for (const auto &o : outputs) check(bp_graph_build(h->g, o.t));
  return Graph{h};
}

void ensure_sched(GraphH &G, const py::object &backends) {
  std::string spec = py::isinstance<py::str>(backends) ? backends.cast<std::string>() : "";
  if (G.sched && !spec.empty() && spec == G.spec) return;
  std::vector<BackendP> bes = backends_from(backends);
  if (!is_cpu(bes.back()->be)) {  // the scheduler's fallback must be a CPU backend
    bp_backend *cpu = nullptr;
    check(bp_backend_new("cpu", &cpu));
    bes.push_back(std::make_shared<BackendH>(cpu));
  }
  if (G.sched && spec.empty() && G.sched->backends.size() == bes.size() &&
      std::equal(bes.begin(), bes.end(), G.sched->backends.begin()))
    return;
  std::vector<bp_backend *> raw;
  for (const auto &b : bes) raw.push_back(b->be);
  auto sh = std::make_shared<SchedH>();
  sh->backends = bes;
  sh->s = check_ptr(bp_sched_new(raw.data(), nullptr, raw.size(), G.max_nodes * 2, false));
  // The tensors keep the memory this scheduler gives them for their contexts' lifetime.
  for (const auto &c : G.ctxs) c->add_keep(sh);
  G.sched = sh;
  G.spec = spec;
  G.allocated = false;
}

struct Upload {
  bp_tensor *t;
  const void *data;
  size_t size;
  Ctx *ctx;
  bool done = false;
};

void compute(Graph &self, const py::object &backends) {
  GraphH &G = *self.h;
  ensure_sched(G, backends);
  std::shared_ptr<SchedH> sh = G.sched;
  std::vector<py::object> hold;
  std::vector<Upload> ups;
  size_t nl = bp_graph_leaf_count(G.g);
  for (size_t i = 0; i < nl; ++i) {
    bp_tensor *t = bp_graph_leaf(G.g, i);
    for (const auto &c : G.ctxs) {
      auto it = c->pending.find(t);
      if (it == c->pending.end()) continue;
      py::array a = py::reinterpret_borrow<py::array>(it->second);
      hold.push_back(a);
      ups.push_back({t, a.data(), static_cast<size_t>(a.nbytes()), c.get()});
    }
  }
  std::vector<BackendH *> locks;
  for (const auto &b : sh->backends) locks.push_back(b.get());
  std::sort(locks.begin(), locks.end());
  bp_status st = BP_OK;
  std::string msg;
  bool alloc_needed = !G.allocated;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> glock(G.mu);
    std::vector<std::unique_lock<std::mutex>> held;
    for (BackendH *b : locks) held.emplace_back(b->mu);
    if (alloc_needed) st = bp_sched_alloc_graph(sh->s, G.g);
    for (auto &u : ups) {
      if (st != BP_OK || !u.t->data) continue;
      std::lock_guard<std::mutex> lock(buffer_lock(u.t->buffer));
      st = bp_tensor_set(u.t, u.data, 0, u.size);
      u.done = st == BP_OK;
    }
    if (st == BP_OK) st = bp_sched_graph_compute(sh->s, G.g);
    if (st != BP_OK) msg = bp_last_error();
  }
  if (alloc_needed && st == BP_OK) G.allocated = true;
  for (const auto &u : ups)
    if (u.done) u.ctx->pending.erase(u.t);
  if (st != BP_OK) throw Error{st, msg};
}

bp_sched *sched_of(const Graph &self) {
  if (!self.h->sched) fail(BP_ERR_FAILED_PRECONDITION, "the graph has not been computed yet");
  return self.h->sched->s;
}

std::vector<Tensor> tensors_of(const Graph &self, bool leafs) {
  std::vector<Tensor> out;
  size_t n = leafs ? bp_graph_leaf_count(self.h->g) : bp_graph_node_count(self.h->g);
  for (size_t i = 0; i < n; ++i) {
    bp_tensor *t = leafs ? bp_graph_leaf(self.h->g, i) : bp_graph_node(self.h->g, i);
    out.push_back(Tensor{self.h->umbrella, t, infer_ndim(t, 1)});
  }
  return out;
}

}  // namespace

void init_graph(py::module_ &m) {
  py::class_<Split>(m, "Split", "One split of a computed graph: consecutive nodes on one backend.")
      .def_readonly("backend", &Split::backend)
      .def_readonly("first_node", &Split::first_node)
      .def_readonly("n_nodes", &Split::n_nodes)
      .def_readonly("n_inputs", &Split::n_inputs)
      .def_readonly("bytes_copied", &Split::bytes_copied)
      .def_readonly("n_plans", &Split::n_plans)
      .def("__repr__", [](const Split &s) {
        return "Split('" + s.backend + "', first_node=" + std::to_string(s.first_node) +
               ", n_nodes=" + std::to_string(s.n_nodes) + ", n_inputs=" + std::to_string(s.n_inputs) + ")";
      });

  py::class_<Graph>(m, "Graph", "The nodes that compute the given output tensors (bp_graph).")
      .def(py::init([](py::args outs, size_t max_nodes) {
             std::vector<Tensor> v;
             for (auto o : outs) {
               if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
                 for (auto x : o) v.push_back(x.cast<Tensor>());
               } else {
                 v.push_back(o.cast<Tensor>());
               }
             }
             return make_graph(v, max_nodes);
           }),
           py::kw_only(), py::arg("max_nodes") = 0)
      .def("compute", &compute, py::arg("backends") = "cpu",
           "Runs the graph through a scheduler over |backends| (a spec or ';' list, a Backend, or a list), in "
           "priority order; a CPU backend is added last when the list does not end with one. The GIL is "
           "released while it runs.")
      .def_property_readonly("outputs", [](const Graph &g) { return g.h->outputs; })
      .def_property_readonly("node_count", [](const Graph &g) { return bp_graph_node_count(g.h->g); })
      .def_property_readonly("leaf_count", [](const Graph &g) { return bp_graph_leaf_count(g.h->g); })
      .def_property_readonly("nodes", [](const Graph &g) { return tensors_of(g, false); })
      .def_property_readonly("leafs", [](const Graph &g) { return tensors_of(g, true); })
      .def("validate", [](const Graph &g) { check(bp_graph_validate(g.h->g)); })
      .def_property_readonly("backends",
                             [](const Graph &g) {
                               std::vector<std::string> out;
                               bp_sched *s = sched_of(g);
                               for (size_t i = 0; i < bp_sched_backend_count(s); ++i)
                                 out.push_back(bp_backend_name(bp_sched_backend(s, i)));
                               return out;
                             })
      .def_property_readonly("splits",
                             [](const Graph &g) {
                               bp_sched *s = sched_of(g);
                               std::vector<Split> out;
                               for (size_t i = 0; i < bp_sched_split_count(s); ++i) {
                                 bp_sched_split_info info{};
                                 info.struct_size = sizeof info;
                                 check(bp_sched_split_describe(s, i, &info));
                                 out.push_back({bp_backend_name(info.backend), info.first_node, info.n_nodes,
                                                info.n_inputs, info.n_plans, info.bytes_copied});
                               }
                               return out;
                             })
      .def_property_readonly("copy_count", [](const Graph &g) { return bp_sched_copy_count(sched_of(g)); })
      .def_property_readonly(
          "node_counts",
          [](const Graph &g) {
            bp_sched *s = sched_of(g);
            std::map<std::string, size_t> out;
            for (size_t i = 0; i < bp_sched_backend_count(s); ++i) out[bp_backend_name(bp_sched_backend(s, i))] = 0;
            for (size_t i = 0; i < bp_graph_node_count(g.h->g); ++i) {
              bp_tensor *t = bp_graph_node(g.h->g, i);
              if (bp_op_is_view(t->op)) continue;
              bp_backend *be = bp_sched_get_tensor_backend(s, t);
              if (be) ++out[bp_backend_name(be)];
            }
            return out;
          },
          "Computed (non-view) nodes per backend name in the last schedule.")
      .def_property_readonly("buffer_sizes", [](const Graph &g) {
        bp_sched *s = sched_of(g);
        std::map<std::string, size_t> out;
        for (size_t i = 0; i < bp_sched_backend_count(s); ++i) {
          bp_backend *be = bp_sched_backend(s, i);
          out[bp_backend_name(be)] = bp_sched_buffer_size(s, be);
        }
        return out;
      });

  m.def(
      "compute",
      [](py::args outs, const py::object &backends) {
        std::vector<Tensor> v;
        for (auto o : outs) v.push_back(o.cast<Tensor>());
        Graph g = make_graph(v, 0);
        compute(g, backends);
        py::list res;
        for (auto o : outs) res.append(o.attr("numpy")());
        return res.size() == 1 ? py::object(res[0]) : py::object(py::tuple(res));
      },
      py::kw_only(), py::arg("backends") = "cpu",
      "Builds a graph of the tensors, computes it on |backends| and returns their values as NumPy arrays.");
}

}  // namespace bppy
