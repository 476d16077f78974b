// run.cpp: bp-run's two runs of the same model. First through the scheduler
// on the user's device list (weights in a WEIGHTS buffer of the first backend
// that can hold them), then on a lone cpu backend through the graph allocator
// and bp_backend_graph_compute: an independent path that gives the reference
// logits and the allocator's peak.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "run.hpp"

namespace bp::run {
namespace {

using clock_type = std::chrono::steady_clock;

std::string last_error() {
  std::string e = bp_last_error();
  return e.empty() ? "(no message)" : e;
}

struct backends_holder {
  std::vector<bp_backend *> list;
  ~backends_holder() {
    for (bp_backend *b : list) bp_backend_free(b);
  }
};
struct buffer_holder {
  bp_buffer *buf = nullptr;
  ~buffer_holder() { bp_buffer_free(buf); }
};
struct sched_holder {
  bp_sched *sched = nullptr;
  ~sched_holder() { bp_sched_free(sched); }
};
struct gallocr_holder {
  bp_gallocr *galloc = nullptr;
  ~gallocr_holder() { bp_gallocr_free(galloc); }
};

std::string plugin_of(bp_backend *be) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (bp_device_describe(bp_backend_device(be), &info) != BP_OK || !info.plugin) return "";
  const char *name = bp_plugin_name(info.plugin);
  return name ? name : "";
}

std::string name_of(const bp_backend *be) {
  const char *n = be ? bp_backend_name(be) : nullptr;
  return n ? n : "?";
}

// Backends for |spec|; "auto" falls back to "cpu". A list without the cpu
// plugin gets a cpu backend appended: the scheduler needs a last backend
// that runs every op.
bool init_backends(const std::string &spec, backends_holder &out, run_report &rep) {
  std::vector<bp_backend *> buf(32, nullptr);
  size_t n = 0;
  bp_status st = bp_backend_new_list(spec.c_str(), buf.data(), buf.size(), &n);
  if (st != BP_OK && spec == "auto") {
    rep.notes.push_back("\"auto\" failed (" + std::string(bp_status_name(st)) + ": " + last_error() +
                        "); using \"cpu\"");
    st = bp_backend_new_list("cpu", buf.data(), buf.size(), &n);
  }
  if (st != BP_OK) {
    rep.error = "--device \"" + spec + "\": " + bp_status_name(st) + ": " + last_error();
    return false;
  }
  out.list.assign(buf.begin(), buf.begin() + static_cast<long>(n));
  bool has_cpu = std::any_of(out.list.begin(), out.list.end(), [](bp_backend *b) { return plugin_of(b) == "cpu"; });
  if (!has_cpu) {
    bp_backend *cpu = nullptr;
    if (bp_backend_new("cpu", &cpu) != BP_OK) {
      rep.error = "the device list has no cpu backend and \"cpu\" failed: " + last_error();
      return false;
    }
    out.list.push_back(cpu);
    rep.notes.push_back("appended \"cpu\" as the last backend: it runs every op the others do not");
  }
  for (bp_backend *b : out.list) rep.backends.push_back(name_of(b));
  return true;
}

// Weights go to the first backend that can hold them, else the last (cpu).
bool place_weights(const model &m, const std::vector<bp_backend *> &bes, buffer_holder &wbuf, run_report &rep,
                   bp_backend **out_backend) {
  for (size_t i = 0; i < bes.size(); ++i) {
    if (bp_context_alloc_tensors(m.weights_ctx, bes[i], &wbuf.buf) == BP_OK) {
      *out_backend = bes[i];
      break;
    }
    rep.notes.push_back("weights do not fit on " + name_of(bes[i]) + ": " + last_error());
  }
  if (!wbuf.buf) {
    rep.error = "no backend could hold the weights";
    return false;
  }
  bp_buffer_set_usage(wbuf.buf, BP_BUFFER_USAGE_WEIGHTS);
  if (load_weights(m) != BP_OK) {
    rep.error = "writing the weights: " + last_error();
    return false;
  }
  return true;
}

void record_plan(const model &m, bp_sched *sched, const std::vector<bp_backend *> &bes, run_report &rep) {
  rep.splits.clear();
  rep.per_backend.clear();
  rep.bytes_copied = 0;
  for (size_t i = 0, n = bp_sched_split_count(sched); i < n; ++i) {
    bp_sched_split_info info{};
    info.struct_size = sizeof info;
    if (bp_sched_split_describe(sched, i, &info) != BP_OK) continue;
    rep.splits.push_back(
        {name_of(info.backend), info.first_node, info.n_nodes, info.n_inputs, info.bytes_copied, info.n_plans});
    rep.bytes_copied += info.bytes_copied;
  }
  rep.n_copies = bp_sched_copy_count(sched);
  for (bp_backend *b : bes) rep.per_backend.push_back({name_of(b), 0, {}});
  for (size_t i = 0, n = bp_graph_node_count(m.graph); i < n; ++i) {
    bp_tensor *node = bp_graph_node(m.graph, i);
    if (!node || bp_op_is_view(node->op)) continue;
    bp_backend *be = bp_sched_get_tensor_backend(sched, node);
    for (size_t k = 0; k < bes.size(); ++k) {
      if (bes[k] != be) continue;
      rep.per_backend[k].n_nodes++;
      rep.per_backend[k].ops[bp_op_name(node->op)]++;
    }
  }
}

double elapsed_ms(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// The scheduler run on the device list; logits into |out|.
bool run_scheduled(const options &opt, backends_holder &bes, run_report &rep, std::vector<float> &out) {
  model m;
  if (build_model(opt.cfg, m) != BP_OK) {
    rep.error = "building the model: " + last_error();
    return false;
  }
  buffer_holder wbuf;
  bp_backend *wbe = nullptr;
  if (!place_weights(m, bes.list, wbuf, rep, &wbe)) return false;
  rep.buffers.push_back({"weights", name_of(wbe), bp_buffer_type_name(bp_buffer_buffer_type(wbuf.buf)),
                         bp_buffer_size(wbuf.buf)});

  sched_holder sh;
  sh.sched = bp_sched_new(bes.list.data(), nullptr, static_cast<int>(bes.list.size()),
                          bp_graph_node_count(m.graph) + bp_graph_leaf_count(m.graph) + 64, false);
  if (!sh.sched) {
    rep.error = "creating the scheduler: " + last_error();
    return false;
  }
  if (bp_sched_set_graph_plans(sh.sched, opt.plans) != BP_OK) {
    rep.error = "bp_sched_set_graph_plans: " + last_error();
    return false;
  }
  if (bp_sched_reserve(sh.sched, m.graph) != BP_OK) {
    rep.error = "bp_sched_reserve: " + last_error();
    return false;
  }
  // Planned and allocated once, like the reference below: a run's time is
  // inputs, compute and reading the logits on both sides.
  bp_sched_reset(sh.sched);
  if (bp_sched_alloc_graph(sh.sched, m.graph) != BP_OK) {
    rep.error = "bp_sched_alloc_graph: " + last_error();
    return false;
  }
  // The plan is fixed now: write it before the timed runs, so a bad path
  // fails fast.
  if (!opt.dot_path.empty()) {
    std::string err;
    if (!write_dot(opt.dot_path, m.graph, sh.sched, bes.list, err)) {
      rep.error = err;
      return false;
    }
  }
  out.assign(static_cast<size_t>(bp_tensor_nelements(m.logits)), 0.0f);
  for (int r = 0; r < opt.runs; ++r) {
    auto t0 = clock_type::now();
    bp_status st;
    if ((st = set_inputs(m)) != BP_OK || (st = bp_sched_graph_compute(sh.sched, m.graph)) != BP_OK ||
        (st = bp_sched_synchronize(sh.sched)) != BP_OK ||
        (st = bp_tensor_get(m.logits, out.data(), 0, out.size() * sizeof(float))) != BP_OK) {
      rep.error = "running the graph through the scheduler: " + std::string(bp_status_name(st)) + ": " +
                  last_error();
      return false;
    }
    rep.run_ms.push_back(elapsed_ms(t0));
    if (r == 0) record_plan(m, sh.sched, bes.list, rep);
  }
  // Backends with one buffer type share one compute buffer: list it once.
  std::vector<bp_buffer_type *> listed;
  for (bp_backend *b : bes.list) {
    bp_buffer_type *buft = bp_backend_buffer_type(b);
    if (std::find(listed.begin(), listed.end(), buft) != listed.end()) continue;
    listed.push_back(buft);
    rep.buffers.push_back({"compute", name_of(b), buft ? bp_buffer_type_name(buft) : "?",
                           bp_sched_buffer_size(sh.sched, b)});
  }
  return true;
}

// cpu alone, through the graph allocator: the reference logits.
bool run_reference(const options &opt, run_report &rep, std::vector<float> &out) {
  backends_holder cpu;
  cpu.list.push_back(nullptr);
  if (bp_backend_new("cpu", &cpu.list[0]) != BP_OK) {
    cpu.list.clear();
    rep.error = "the cpu reference backend: " + last_error();
    return false;
  }
  model m;
  if (build_model(opt.cfg, m) != BP_OK) {
    rep.error = "building the reference model: " + last_error();
    return false;
  }
  rep.weight_bytes = weights_bytes(m);
  buffer_holder wbuf;
  bp_backend *wbe = nullptr;
  run_report scratch;  // the reference's own notes are not interesting
  if (!place_weights(m, cpu.list, wbuf, scratch, &wbe)) {
    rep.error = "reference: " + scratch.error;
    return false;
  }
  bp_buffer_type *buft = bp_backend_buffer_type(cpu.list[0]);
  rep.largest_live_set = largest_live_set(m.graph, buft, true);
  rep.largest_live_set_no_inplace = largest_live_set(m.graph, buft, false);
  gallocr_holder ga;
  ga.galloc = bp_gallocr_new(buft);
  if (!ga.galloc || bp_gallocr_alloc_graph(ga.galloc, m.graph) != BP_OK) {
    rep.error = "graph allocator on cpu: " + last_error();
    return false;
  }
  rep.gallocr_peak = bp_gallocr_buffer_size(ga.galloc);
  out.assign(static_cast<size_t>(bp_tensor_nelements(m.logits)), 0.0f);
  for (int r = 0; r < opt.runs; ++r) {
    auto t0 = clock_type::now();
    bp_status st;
    if ((st = set_inputs(m)) != BP_OK || (st = bp_backend_graph_compute(cpu.list[0], m.graph)) != BP_OK ||
        (st = bp_tensor_get(m.logits, out.data(), 0, out.size() * sizeof(float))) != BP_OK) {
      rep.error = "running the reference on cpu: " + std::string(bp_status_name(st)) + ": " + last_error();
      return false;
    }
    rep.reference_ms.push_back(elapsed_ms(t0));
  }
  return true;
}

double nmse(const std::vector<float> &got, const std::vector<float> &want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  if (got.size() != want.size() || !std::isfinite(err)) return INFINITY;
  return ref > 0 ? err / ref : err;
}

}  // namespace

bool run_all(const options &opt, run_report &rep) {
  rep.opt = opt;
  for (const std::string &dir : opt.plugin_paths) {
    if (bp_registry_add_path(dir.c_str()) != BP_OK) {
      rep.error = "--plugin-path " + dir + ": " + last_error();
      return false;
    }
  }
  for (const std::string &file : opt.plugin_files) {
    if (bp_registry_load(file.c_str(), nullptr) != BP_OK) {
      rep.error = "--plugin " + file + ": " + last_error();
      return false;
    }
  }
  std::vector<float> got, want;
  {
    backends_holder bes;
    if (!init_backends(opt.device, bes, rep)) return false;
    if (!run_scheduled(opt, bes, rep, got)) return false;
  }
  if (!run_reference(opt, rep, want)) return false;
  rep.nmse = nmse(got, want);
  rep.logits = got;
  rep.weight_bytes_f32 = rep.weight_bytes;
  if (bp_type_is_quantized(opt.cfg.weights)) {  // the same model with f32 weights, once
    options f32 = opt;
    f32.cfg.weights = BP_TYPE_F32;
    f32.runs = 1;
    run_report scratch;
    std::vector<float> exact;
    if (!run_reference(f32, scratch, exact)) {
      rep.error = "the f32 model: " + scratch.error;
      return false;
    }
    rep.weight_bytes_f32 = scratch.weight_bytes;
    rep.nmse_vs_f32 = nmse(want, exact);
  }
  rep.pass = rep.nmse < kNmseTolerance;
  return true;
}

namespace {

// The ops whose output the core lets overwrite src0 (same type and shape,
// both contiguous): the op table's in-place rule, seen from outside.
bool inplace_op(bp_op op) {
  switch (op) {
    case BP_OP_ADD: case BP_OP_SUB: case BP_OP_MUL: case BP_OP_DIV: case BP_OP_SCALE: case BP_OP_CLAMP:
    case BP_OP_NEG: case BP_OP_ABS: case BP_OP_SQR: case BP_OP_SQRT: case BP_OP_EXP: case BP_OP_RELU:
    case BP_OP_GELU: case BP_OP_SILU: case BP_OP_TANH: case BP_OP_SIGMOID: case BP_OP_NORM: case BP_OP_RMS_NORM:
    case BP_OP_SOFT_MAX: case BP_OP_ROPE:
      return true;
    default:
      return false;
  }
}

}  // namespace

uint64_t largest_live_set(const bp_graph *graph, bp_buffer_type *buft, bool inplace) {
  const size_t n = bp_graph_node_count(graph);
  const size_t align = std::max<size_t>(1, bp_buffer_type_alignment(buft));
  struct life {
    long first, last;
    uint64_t bytes;
  };
  std::map<const bp_tensor *, life> lives;           // tensors the allocator places
  std::map<const bp_tensor *, const bp_tensor *> rep;  // in-place output -> tensor whose memory it took
  auto owner = [&](const bp_tensor *t) {
    while (t && t->view_src) t = t->view_src;
    for (auto it = rep.find(t); it != rep.end(); it = rep.find(t)) t = it->second;
    return t;
  };
  auto size_of = [&](const bp_tensor *t) {
    uint64_t s = bp_buffer_type_alloc_size(buft, t);
    return (s + align - 1) / align * align;
  };
  for (size_t i = 0, nl = bp_graph_leaf_count(graph); i < nl; ++i) {
    const bp_tensor *t = bp_graph_leaf(graph, i);
    if (t && !t->data && !t->view_src) lives[t] = {-1, -1, size_of(t)};
  }
  for (size_t i = 0; i < n; ++i) {
    const bp_tensor *t = bp_graph_node(graph, i);
    if (t && !t->data && !t->view_src && !bp_op_is_view(t->op))
      lives[t] = {static_cast<long>(i), static_cast<long>(i), size_of(t)};
  }
  for (size_t i = 0; i < n; ++i) {
    const bp_tensor *t = bp_graph_node(graph, i);
    for (int s = 0; t && s < BP_MAX_SRC; ++s) {
      auto it = lives.find(owner(t->src[s]));
      if (it != lives.end()) it->second.last = std::max(it->second.last, static_cast<long>(i));
    }
    auto self = lives.find(owner(t));
    if (self != lives.end() && (t->flags & BP_TENSOR_FLAG_OUTPUT)) self->second.last = static_cast<long>(n);
  }
  // In-place: a node whose src0 dies at it takes src0's memory.
  for (size_t i = 0; inplace && i < n; ++i) {
    const bp_tensor *t = bp_graph_node(graph, i), *a = t ? t->src[0] : nullptr;
    auto self = lives.find(t);
    if (!a || a->view_src || self == lives.end() || !inplace_op(t->op) || (t->flags & BP_TENSOR_FLAG_OUTPUT))
      continue;
    if (a->type != t->type || !bp_tensor_same_shape(a, t) || !bp_tensor_is_contiguous(a) ||
        !bp_tensor_is_contiguous(t))
      continue;
    auto parent = lives.find(owner(a));
    if (parent == lives.end() || parent->second.last != static_cast<long>(i) || parent->second.first < 0) continue;
    parent->second.last = self->second.last;
    parent->second.bytes = std::max(parent->second.bytes, self->second.bytes);
    rep[t] = parent->first;
    lives.erase(self);
  }
  uint64_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t live = 0;
    for (const auto &[t, l] : lives)
      if (l.first <= static_cast<long>(i) && static_cast<long>(i) <= l.last) live += l.bytes;
    best = std::max(best, live);
  }
  return best;
}

}  // namespace bp::run
