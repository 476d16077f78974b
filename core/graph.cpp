// graph.cpp: compute graphs (bp_graph_*): the nodes an output depends on, in
// topological order, found by a depth-first post-order walk over src[].
//
// The walk uses an explicit stack so deep chains (long sequences of ops)
// cannot overflow the C stack. Leafs are the op NONE tensors; everything else,
// views included, is a node (backends skip views via bp_op_is_view).
#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ops_internal.hpp"

namespace {

using bp::core::set_errorf;

enum class mark : uint8_t { in_progress, done };

struct frame {
  bp_tensor *t;
  int next_src;
};

std::string name_of(const bp_tensor *t) {
  return t->name[0] ? std::string("'") + std::string(t->name, strnlen(t->name, BP_MAX_NAME)) + "'"
                    : std::string("(unnamed)");
}

// Makes g->members hold exactly what is in g->nodes and g->leafs. Both
// lists are duplicate-free, so equal sizes mean the set is current; a graph
// whose lists were filled without bp_graph_build gets it rebuilt once here.
void sync_members(bp_graph *g) {
  if (g->members.size() == g->nodes.size() + g->leafs.size()) return;
  g->members.clear();
  g->members.reserve(g->nodes.size() + g->leafs.size());
  g->members.insert(g->nodes.begin(), g->nodes.end());
  g->members.insert(g->leafs.begin(), g->leafs.end());
}

// Capacity for |extra| more entries, growing geometrically (a plain reserve
// of size + 1 on every call would copy the whole list each time).
void make_room(std::vector<bp_tensor *> &list, size_t extra) {
  const size_t need = list.size() + extra;
  if (need > list.capacity()) list.reserve(std::max(need, 2 * list.capacity()));
}

// Walks only tensors that are not yet in the graph (g->members): a tensor
// already there is done, with all it depends on, so a source found in the set
// is not entered. Building a graph of n tensors by n calls, one per node in
// any order, thus costs O(n) in all, and one call costs O(what it adds).
bp_status build_impl(bp_graph *g, bp_tensor *out) {
  sync_members(g);
  if (g->members.count(out) != 0) {
    out->flags |= BP_TENSOR_FLAG_OUTPUT;
    return BP_OK;
  }
  // Marks of the tensors this walk met (none of them in the graph yet). New
  // entries go to the side until the walk succeeds, so a failed build leaves
  // the graph as it was.
  std::unordered_map<const bp_tensor *, mark> marks;
  std::vector<bp_tensor *> new_nodes, new_leafs;
  std::vector<frame> stack;
  stack.push_back({out, 0});
  marks[out] = mark::in_progress;
  while (!stack.empty()) {
    frame &f = stack.back();
    if (f.next_src < BP_MAX_SRC) {
      bp_tensor *s = f.t->src[f.next_src++];
      if (s == nullptr || g->members.count(s) != 0) continue;
      auto it = marks.find(s);
      if (it == marks.end()) {
        marks.emplace(s, mark::in_progress);
        stack.push_back({s, 0});  // invalidates |f|: not used below
      } else if (it->second == mark::in_progress) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT,
                          "bp_graph_build: tensor %s depends on itself (a cycle through src[]): a graph must be "
                          "acyclic",
                          name_of(s).c_str());
      }
      continue;
    }
    bp_tensor *t = f.t;
    stack.pop_back();
    marks[t] = mark::done;
    // enum_value: a caller may have stored any int in op; validate reports it.
    const bool is_leaf = bp::core::enum_value(t->op) == BP_OP_NONE;
    std::vector<bp_tensor *> &list = is_leaf ? new_leafs : new_nodes;
    const std::vector<bp_tensor *> &have = is_leaf ? g->leafs : g->nodes;
    if (have.size() + list.size() >= g->max_nodes) {
      return set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                        "bp_graph_build: more than %zu %s (max_nodes): create the graph with a larger max_nodes",
                        g->max_nodes, is_leaf ? "leafs" : "nodes");
    }
    list.push_back(t);
  }
  // Commit. Room in the lists first, then the set, then the appends, which
  // no longer allocate: all or nothing. None of the new tensors was in the
  // set before, so erasing all of them undoes a partial insert.
  make_room(g->nodes, new_nodes.size());
  make_room(g->leafs, new_leafs.size());
  try {
    g->members.insert(new_nodes.begin(), new_nodes.end());
    g->members.insert(new_leafs.begin(), new_leafs.end());
  } catch (...) {
    for (bp_tensor *t : new_nodes) g->members.erase(t);
    for (bp_tensor *t : new_leafs) g->members.erase(t);
    throw;
  }
  g->nodes.insert(g->nodes.end(), new_nodes.begin(), new_nodes.end());
  g->leafs.insert(g->leafs.end(), new_leafs.begin(), new_leafs.end());
  out->flags |= BP_TENSOR_FLAG_OUTPUT;
  return BP_OK;
}

bp_status validate_impl(const bp_graph *g) {
  std::unordered_set<const bp_tensor *> seen(g->leafs.begin(), g->leafs.end());
  for (const bp_tensor *t : g->leafs) {
    if (bp::core::validate_node(t) != BP_OK) return BP_ERR_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const bp_tensor *t = g->nodes[i];
    if (bp::core::validate_node(t) != BP_OK) {
      std::string msg = bp_last_error();
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "graph node %zu: %s", i, msg.c_str());
    }
    for (int s = 0; s < BP_MAX_SRC; ++s) {
      if (t->src[s] != nullptr && seen.count(t->src[s]) == 0) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT,
                          "graph node %zu %s (%s): source %d %s is not a leaf or an earlier node: rebuild the graph "
                          "with bp_graph_build",
                          i, name_of(t).c_str(), bp::core::ops::op_name(bp::core::enum_value(t->op)), s,
                          name_of(t->src[s]).c_str());
      }
    }
    seen.insert(t);
  }
  return BP_OK;
}

}  // namespace

using bp::core::api_guard;
using bp::core::api_guard_ptr;
using bp::core::bad_handle;
using bp::core::handle_ok;
using bp::core::TAG_DEAD;
using bp::core::TAG_GRAPH;

extern "C" {

BP_API bp_graph *bp_graph_new(bp_context *ctx, size_t max_nodes) {
  // |ctx| is not retained (the graph only points at the context's tensors),
  // but it is checked: a NULL here is usually a failed bp_context_new.
  return api_guard_ptr<bp_graph>([&]() -> bp_graph * {
    if (!handle_ok(ctx, bp::core::TAG_CONTEXT)) {
      bad_handle("bp_graph_new", "ctx", ctx, bp::core::TAG_CONTEXT);
      return nullptr;
    }
    auto *g = new bp_graph();
    g->max_nodes = max_nodes ? max_nodes : 4096;
    g->ctx = ctx;
    return g;
  });
}

BP_API void bp_graph_free(bp_graph *graph) {
  BP_API_SCOPE();
  if (graph == nullptr) return;
  if (!bp::core::free_check(graph, TAG_GRAPH, "bp_graph_free", "graph")) return;
  bp::core::retire_handle(graph);
}

BP_API bp_status bp_graph_build(bp_graph *graph, bp_tensor *t) {
  return api_guard([&]() -> bp_status {
    if (!handle_ok(graph, TAG_GRAPH)) return bad_handle("bp_graph_build", "graph", graph, TAG_GRAPH);
    if (t == nullptr) {
      // Usually the graph-building call just before failed: its status and
      // message are this call's (docs/errors.md, NULL propagation).
      bp::core::null_input_in(graph->ctx, "bp_graph_build", "t");
      return bp::core::last_status();
    }
    return build_impl(graph, t);
  });
}

BP_API void bp_graph_clear(bp_graph *graph) {
  BP_API_SCOPE();
  if (!handle_ok(graph, TAG_GRAPH)) return (void)bad_handle("bp_graph_clear", "graph", graph, TAG_GRAPH);
  graph->nodes.clear();
  graph->leafs.clear();
  graph->members.clear();
}

BP_API size_t bp_graph_node_count(const bp_graph *graph) {
  BP_API_SCOPE();
  if (!handle_ok(graph, TAG_GRAPH)) return (void)bad_handle("bp_graph_node_count", "graph", graph, TAG_GRAPH), 0;
  return graph->nodes.size();
}

BP_API bp_tensor *bp_graph_node(const bp_graph *graph, size_t i) {
  BP_API_SCOPE();
  if (!handle_ok(graph, TAG_GRAPH)) return (void)bad_handle("bp_graph_node", "graph", graph, TAG_GRAPH), nullptr;
  return i < graph->nodes.size() ? graph->nodes[i] : nullptr;  // past the end: the end of an iteration
}

BP_API size_t bp_graph_leaf_count(const bp_graph *graph) {
  BP_API_SCOPE();
  if (!handle_ok(graph, TAG_GRAPH)) return (void)bad_handle("bp_graph_leaf_count", "graph", graph, TAG_GRAPH), 0;
  return graph->leafs.size();
}

BP_API bp_tensor *bp_graph_leaf(const bp_graph *graph, size_t i) {
  BP_API_SCOPE();
  if (!handle_ok(graph, TAG_GRAPH)) return (void)bad_handle("bp_graph_leaf", "graph", graph, TAG_GRAPH), nullptr;
  return i < graph->leafs.size() ? graph->leafs[i] : nullptr;  // past the end: the end of an iteration
}

BP_API bp_status bp_graph_validate(const bp_graph *graph) {
  return api_guard([&]() -> bp_status {
    if (!handle_ok(graph, TAG_GRAPH)) return bad_handle("bp_graph_validate", "graph", graph, TAG_GRAPH);
    return validate_impl(graph);
  });
}

}  // extern "C"
