// dot.cpp: the split graph as Graphviz. Node fill = the backend the
// scheduler chose (a legend lists them); leaves (weights, inputs) are boxes
// filled by the backend whose buffer holds them; views are dotted. An edge
// whose source lives in memory the consumer's backend cannot use is where
// the scheduler copies: it is drawn red and dashed, labelled "copy".
#include <cstdio>
#include <fstream>
#include <map>

#include "run.hpp"

namespace bp::run {
namespace {

const char *const kPalette[] = {"#80b1d3", "#fdb462", "#b3de69", "#fb8072", "#bebada", "#8dd3c7", "#fccde5",
                                "#ffffb3"};

const bp_tensor *owner(const bp_tensor *t) {
  while (t && t->view_src) t = t->view_src;
  return t;
}

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string shape(const bp_tensor *t) {
  std::string s = "[";
  for (int d = 0; d < BP_MAX_DIMS; ++d) s += std::to_string(t->ne[d]) + (d + 1 < BP_MAX_DIMS ? "," : "]");
  return s;
}

}  // namespace

bool write_dot(const std::string &path, const bp_graph *graph, const bp_sched *sched,
               const std::vector<bp_backend *> &backends, std::string &error) {
  std::ofstream f(path);
  if (!f) {
    error = "--dot " + path + ": cannot open the file for writing";
    return false;
  }
  std::map<const bp_backend *, int> color_of;
  for (size_t i = 0; i < backends.size(); ++i) color_of[backends[i]] = static_cast<int>(i % 8);
  // The backend whose memory holds |t| (leaves), by device.
  auto buffer_backend = [&](const bp_tensor *t) -> bp_backend * {
    const bp_tensor *o = owner(t);
    if (!o || !o->buffer) return nullptr;
    bp_device *dev = bp_buffer_type_device(bp_buffer_buffer_type(o->buffer));
    for (bp_backend *b : backends)
      if (bp_backend_device(b) == dev) return b;
    return nullptr;
  };
  std::map<const bp_tensor *, std::string> id;
  auto id_of = [&](const bp_tensor *t) {
    auto it = id.find(t);
    if (it != id.end()) return it->second;
    return id[t] = "t" + std::to_string(id.size());
  };

  f << "digraph backplane_plan {\n  rankdir=TB;\n  node [style=filled, fontname=\"Helvetica\", fontsize=10];\n";
  f << "  subgraph cluster_legend {\n    label=\"backends\";\n";
  for (size_t i = 0; i < backends.size(); ++i)
    f << "    legend" << i << " [label=\"" << escape(bp_backend_name(backends[i])) << "\", shape=box, fillcolor=\""
      << kPalette[i % 8] << "\"];\n";
  f << "  }\n";

  for (size_t i = 0, n = bp_graph_leaf_count(graph); i < n; ++i) {
    const bp_tensor *t = bp_graph_leaf(graph, i);
    bp_backend *b = buffer_backend(t);
    f << "  " << id_of(t) << " [shape=box, label=\"" << escape(t->name) << "\\n" << shape(t) << "\", fillcolor=\""
      << (b ? kPalette[color_of[b]] : "white") << "\"];\n";
  }
  for (size_t i = 0, n = bp_graph_node_count(graph); i < n; ++i) {
    const bp_tensor *t = bp_graph_node(graph, i);
    bp_backend *b = bp_sched_get_tensor_backend(sched, t);
    f << "  " << id_of(t) << " [label=\"#" << i << " " << bp_op_name(t->op) << "\\n" << escape(t->name) << "\\n"
      << shape(t) << "\", fillcolor=\"" << (b ? kPalette[color_of[b]] : "white") << "\""
      << (bp_op_is_view(t->op) ? ", style=\"filled,dotted\"" : "") << "];\n";
  }
  for (size_t i = 0, n = bp_graph_node_count(graph); i < n; ++i) {
    const bp_tensor *t = bp_graph_node(graph, i);
    bp_backend *b = bp_sched_get_tensor_backend(sched, t);
    for (int s = 0; s < BP_MAX_SRC; ++s) {
      const bp_tensor *src = t->src[s];
      if (!src) continue;
      const bp_tensor *o = owner(src);
      bool copy = b && !bp_op_is_view(t->op) && o && o->buffer &&
                  !bp_backend_supports_buft(b, bp_buffer_buffer_type(o->buffer));
      f << "  " << id_of(src) << " -> " << id_of(t)
        << (copy ? " [color=red, style=dashed, penwidth=2, label=\"copy\", fontcolor=red]" : "") << ";\n";
    }
  }
  f << "}\n";
  if (!f) {
    error = "--dot " + path + ": write failed";
    return false;
  }
  return true;
}

}  // namespace bp::run
