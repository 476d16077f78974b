// graph_wire.cpp: graphs and nodes by value (graph_wire.hpp).
#include "graph_wire.hpp"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fingerprint.hpp"

namespace bp::remote_plugin {
namespace {

class tensor_list {
 public:
  // |nodes|: the tensors the graph computes. Anything else is described by
  // its memory alone: a leaf (even one an earlier graph computed, such as
  // the scheduler's split boundaries), or a view of its memory root.
  tensor_list(google::protobuf::RepeatedPtrField<pb::TensorDesc> *out, const session *s,
              const std::unordered_set<const bp_tensor *> *nodes)
      : out_(out), s_(s), nodes_(nodes) {}

  // The index of |t|, adding it (after its sources) when it is new. Walks
  // with an explicit stack: a long chain of nodes must not exhaust the
  // native stack.
  bp_status add(const bp_tensor *root, int32_t *index, bp_error *err) {
    std::vector<std::pair<const bp_tensor *, bool>> stack{{root, false}};
    while (!stack.empty()) {
      auto [t, expanded] = stack.back();
      stack.pop_back();
      if (index_.count(t)) continue;
      if (!expanded) {
        stack.push_back({t, true});
        if (t->view_src && !index_.count(t->view_src)) stack.push_back({t->view_src, false});
        if (is_node(t))
          for (int i = BP_MAX_SRC - 1; i >= 0; --i)
            if (t->src[i] && !index_.count(t->src[i])) stack.push_back({t->src[i], false});
        continue;
      }
      if (bp_status s = emit(t, err); s != BP_OK) return s;
    }
    *index = index_.at(root);
    return BP_OK;
  }

 private:
  bool is_node(const bp_tensor *t) const { return nodes_->count(t) != 0; }

  bp_status emit(const bp_tensor *t, bp_error *err) {
    pb::TensorDesc *d = out_->Add();
    const bool node = is_node(t);
    d->set_type(static_cast<uint32_t>(t->type));
    for (int i = 0; i < BP_MAX_DIMS; ++i) d->add_ne(t->ne[i]);
    for (int i = 0; i < BP_MAX_DIMS; ++i) d->add_nb(t->nb[i]);
    // Not computed here: a leaf, or a view straight of its memory root.
    const bp_op op = node ? t->op : t->view_src ? t->op : BP_OP_NONE;
    d->set_op(static_cast<uint32_t>(op));
    if (node) {
      int n_params = BP_MAX_OP_PARAMS;
      while (n_params > 0 && t->op_params[n_params - 1] == 0) --n_params;
      for (int i = 0; i < n_params; ++i) d->add_op_params(t->op_params[i]);
      int n_src = BP_MAX_SRC;
      while (n_src > 0 && !t->src[n_src - 1]) --n_src;
      for (int i = 0; i < n_src; ++i) d->add_src(t->src[i] ? index_.at(t->src[i]) : -1);
    }
    d->set_view_src(t->view_src ? index_.at(t->view_src) : -1);
    d->set_view_offs(t->view_src ? t->view_offs : 0);
    {
      d->set_flags(t->flags);
      d->set_name(t->name);
      if (!t->view_src && t->data) {
        const remote_buffer *b = buffer_of(t);
        if (!b || b->sess.get() != s_)
          return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                               "tensor '%s' (%s, %s) is %s; a remote backend computes on memory of its own server "
                               "session only: allocate the tensor with the backend's buffer type",
                               t->name, bp_type_name(t->type), bp::plugins::op_name(t->op),
                               !b ? "in memory of another plugin" : "in memory of another server or session");
        d->set_buffer(b->handle);
        d->set_offset(static_cast<uint64_t>(static_cast<const char *>(t->data) - b->base));
      }
    }
    index_.emplace(t, static_cast<int32_t>(out_->size() - 1));
    return BP_OK;
  }

  google::protobuf::RepeatedPtrField<pb::TensorDesc> *out_;
  const session *s_;
  const std::unordered_set<const bp_tensor *> *nodes_;
  std::unordered_map<const bp_tensor *, int32_t> index_;
};

}  // namespace

bp_status describe_graph(const bp_graph_desc *graph, const session *s, pb::GraphRegisterRequest *out, bp_error *err) {
  std::unordered_set<const bp_tensor *> nodes(graph->nodes, graph->nodes + graph->n_nodes);
  tensor_list list(out->mutable_tensors(), s, &nodes);
  for (uint32_t i = 0; i < graph->n_nodes; ++i) {
    int32_t index = -1;
    if (bp_status st = list.add(graph->nodes[i], &index, err); st != BP_OK) return st;
    out->add_nodes(static_cast<uint32_t>(index));
  }
  return BP_OK;
}

void describe_node(const bp_tensor *node, pb::SupportsOpRequest *out) {
  // The node, its sources and their view sources (a view of a view...);
  // a source's own sources are not part of the question: a computed source
  // is sent as a leaf of its shape, type and strides.
  std::vector<const bp_tensor *> order;
  std::unordered_map<const bp_tensor *, int32_t> index;
  auto add_chain = [&](const bp_tensor *t) {
    std::vector<const bp_tensor *> chain;
    for (const bp_tensor *v = t; v && !index.count(v); v = v->view_src) chain.push_back(v);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      index.emplace(*it, static_cast<int32_t>(order.size()));
      order.push_back(*it);
    }
  };
  for (const bp_tensor *src : node->src)
    if (src) add_chain(src);
  if (node->view_src) add_chain(node->view_src);
  index.emplace(node, static_cast<int32_t>(order.size()));
  order.push_back(node);
  for (const bp_tensor *t : order) {
    pb::TensorDesc *d = out->add_tensors();
    const bool keep_links = t == node || t->view_src;
    d->set_type(static_cast<uint32_t>(t->type));
    for (int i = 0; i < BP_MAX_DIMS; ++i) d->add_ne(t->ne[i]);
    for (int i = 0; i < BP_MAX_DIMS; ++i) d->add_nb(t->nb[i]);
    d->set_op(keep_links ? static_cast<uint32_t>(t->op) : static_cast<uint32_t>(BP_OP_NONE));
    if (keep_links) {
      int n_params = BP_MAX_OP_PARAMS;
      while (n_params > 0 && t->op_params[n_params - 1] == 0) --n_params;
      for (int i = 0; i < n_params; ++i) d->add_op_params(t->op_params[i]);
      int n_src = BP_MAX_SRC;
      while (n_src > 0 && !t->src[n_src - 1]) --n_src;
      for (int i = 0; i < n_src; ++i) {
        auto it = t->src[i] ? index.find(t->src[i]) : index.end();
        d->add_src(it == index.end() ? -1 : it->second);
      }
    }
    auto v = t->view_src ? index.find(t->view_src) : index.end();
    d->set_view_src(v == index.end() ? -1 : v->second);
    d->set_view_offs(t->view_src ? t->view_offs : 0);
  }
}

uint64_t hash_bytes(const std::string &bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace bp::remote_plugin
