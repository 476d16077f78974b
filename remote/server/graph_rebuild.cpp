// graph_rebuild.cpp: TensorDesc list -> tensors of a bp_context
// (graph_rebuild.hpp).
#include "graph_rebuild.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

#include "status.hpp"

namespace bp::remote::server {
namespace {

constexpr uint32_t k_known_flags = BP_TENSOR_FLAG_INPUT | BP_TENSOR_FLAG_OUTPUT | BP_TENSOR_FLAG_PARAM;

std::string who(int i, uint32_t op) {
  std::string w = "node " + std::to_string(i);
  if (op < BP_OP_COUNT) w += std::string(" (") + bp_op_name(static_cast<bp_op>(op)) + ")";
  return w + ": ";
}

std::string dims(const int64_t *v) {
  return "[" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]) + "," +
         std::to_string(v[3]) + "]";
}
std::string dims(const size_t *v) {
  return "[" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]) + "," +
         std::to_string(v[3]) + "]";
}

// One description, read and range-checked before anything is built.
struct desc_view {
  bp_type type = BP_TYPE_F32;
  bp_op op = BP_OP_NONE;
  int64_t ne[BP_MAX_DIMS] = {1, 1, 1, 1};
  size_t nb[BP_MAX_DIMS] = {};
  int32_t params[BP_MAX_OP_PARAMS] = {};
  int n_params = 0;  // without trailing zero words
  int src[BP_MAX_SRC] = {-1, -1, -1, -1};
  int n_src = 0;  // without trailing -1 entries
  int view_src = -1;
};

grpc::Status read_desc(const pb::TensorDesc &d, int i, desc_view *v) {
  const std::string w = who(i, d.op());
  if (d.op() >= BP_OP_COUNT) {
    return invalid(w + "unknown op " + std::to_string(d.op()) + ": this server knows ops 0.." +
                   std::to_string(BP_OP_COUNT - 1) + " (client and server builds differ)");
  }
  if (d.type() >= BP_TYPE_COUNT) {
    return invalid(w + "unknown type " + std::to_string(d.type()) + ": this server knows types 0.." +
                   std::to_string(BP_TYPE_COUNT - 1));
  }
  if (d.ne_size() != BP_MAX_DIMS || d.nb_size() != BP_MAX_DIMS) {
    return invalid(w + "ne and nb must have " + std::to_string(BP_MAX_DIMS) + " entries each, not " +
                   std::to_string(d.ne_size()) + " and " + std::to_string(d.nb_size()));
  }
  if (d.op_params_size() > BP_MAX_OP_PARAMS) {
    return invalid(w + std::to_string(d.op_params_size()) + " op_params words: at most " +
                   std::to_string(BP_MAX_OP_PARAMS));
  }
  if (d.src_size() > BP_MAX_SRC) {
    return invalid(w + std::to_string(d.src_size()) + " sources: at most " + std::to_string(BP_MAX_SRC));
  }
  if ((d.flags() & ~k_known_flags) != 0) return invalid(w + "unknown flag bits " + std::to_string(d.flags()));
  if (d.name().size() >= BP_MAX_NAME) {
    return invalid(w + "the name has " + std::to_string(d.name().size()) + " bytes: at most " +
                   std::to_string(BP_MAX_NAME - 1));
  }
  v->type = static_cast<bp_type>(d.type());
  v->op = static_cast<bp_op>(d.op());
  for (int k = 0; k < BP_MAX_DIMS; ++k) {
    v->ne[k] = d.ne(k);
    v->nb[k] = static_cast<size_t>(d.nb(k));
  }
  for (int k = 0; k < d.op_params_size(); ++k) v->params[k] = d.op_params(k);
  v->n_params = d.op_params_size();
  while (v->n_params > 0 && v->params[v->n_params - 1] == 0) --v->n_params;
  for (int k = 0; k < d.src_size(); ++k) {
    const int32_t s = d.src(k);
    if (s < -1 || s >= i) {
      return invalid(w + "source " + std::to_string(k) + " is index " + std::to_string(s) +
                     ": a source must be an earlier tensor (0.." + std::to_string(i - 1) + ") or -1");
    }
    v->src[k] = s;
  }
  v->n_src = d.src_size();
  while (v->n_src > 0 && v->src[v->n_src - 1] < 0) --v->n_src;
  if (d.view_src() < -1 || d.view_src() >= i) {
    return invalid(w + "view_src is index " + std::to_string(d.view_src()) + ": it must be an earlier tensor (0.." +
                   std::to_string(i - 1) + ") or -1");
  }
  v->view_src = d.view_src();
  return grpc::Status::OK;
}

// A view of |root| with any strides: the layout sorted by stride is a
// bp_view_4d of root, and the order is restored with bp_permute. Used when
// the description names the view's memory root but not its direct source
// (SupportsOp sends a node's sources that way).
bp_tensor *strided_view(bp_context *ctx, bp_tensor *root, const desc_view &v, size_t offs) {
  std::array<int, BP_MAX_DIMS> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    // Dims of one element have no meaningful stride: keep them last.
    const bool a1 = v.ne[a] == 1, b1 = v.ne[b] == 1;
    if (a1 != b1) return b1;
    return v.nb[a] < v.nb[b];
  });
  // bp_view_4d's dim 0 is dense (nb[0] = the element size). When the densest
  // dim that has several elements is strided (one column of a transposed
  // cache, say), a one-element dim goes first instead, standing for that
  // element size.
  if (v.ne[order[0]] != 1 && v.nb[order[0]] != bp_type_size(v.type)) {
    auto unit = std::find_if(order.begin(), order.end(), [&](int d) { return v.ne[d] == 1; });
    if (unit != order.end()) std::rotate(order.begin(), unit, unit + 1);
  }
  int64_t ne[BP_MAX_DIMS];
  size_t nb[BP_MAX_DIMS];
  for (int r = 0; r < BP_MAX_DIMS; ++r) {
    ne[r] = v.ne[order[r]];
    nb[r] = v.nb[order[r]];
  }
  // Strides of trailing one-element dims: the contiguous continuation.
  for (int r = 1; r < BP_MAX_DIMS; ++r) {
    if (ne[r] == 1) nb[r] = nb[r - 1] * static_cast<size_t>(ne[r - 1]);
  }
  bp_tensor *t = bp_view_4d(ctx, root, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offs);
  if (t == nullptr) return nullptr;
  bool identity = true;
  for (int r = 0; r < BP_MAX_DIMS; ++r) identity = identity && order[r] == r;
  if (identity) return t;
  // bp_permute: dim r of t becomes dim axis_r of the result, and dim r of t
  // is dim order[r] of the description.
  return bp_permute(ctx, t, order[0], order[1], order[2], order[3]);
}

size_t offset_in_root(const bp_tensor *t) { return t->view_src ? t->view_offs : 0; }

}  // namespace

grpc::Status rebuild_tensors(session &s, const google::protobuf::RepeatedPtrField<pb::TensorDesc> &descs, bool place,
                             rebuilt_graph *out) {
  if (descs.size() > k_max_graph_tensors) {
    return invalid("the description has " + std::to_string(descs.size()) + " tensors: at most " +
                   std::to_string(k_max_graph_tensors));
  }
  // Views rebuilt by stride may take two tensors each.
  out->ctx = bp_context_new(2 * static_cast<size_t>(descs.size()) + 8);
  if (out->ctx == nullptr) return from_last_error("creating a context: ");
  bp_context *ctx = out->ctx;
  auto fail = [&](grpc::Status st) {
    bp_context_free(out->ctx);
    out->ctx = nullptr;
    out->tensors.clear();
    out->buffers.clear();
    return st;
  };
  std::unordered_map<const bp_tensor *, int> index_of;
  auto &T = out->tensors;
  T.reserve(descs.size());
  for (int i = 0; i < descs.size(); ++i) {
    const pb::TensorDesc &d = descs.Get(i);
    desc_view v;
    if (grpc::Status st = read_desc(d, i, &v); !st.ok()) return fail(st);
    const std::string w = who(i, d.op());
    bp_clear_error();
    bp_tensor *src[BP_MAX_SRC] = {};
    for (int k = 0; k < v.n_src; ++k) src[k] = v.src[k] >= 0 ? T[v.src[k]] : nullptr;
    bp_tensor *t = nullptr;
    if (v.op == BP_OP_NONE) {
      if (v.n_src != 0 || v.view_src >= 0) return fail(invalid(w + "a leaf has no sources and no view_src"));
      t = bp_tensor_new(ctx, v.type, BP_MAX_DIMS, v.ne);
    } else if (bp_op_is_view(v.op)) {
      if (v.view_src < 0) return fail(invalid(w + "a view needs view_src, the tensor whose memory it aliases"));
      bp_tensor *root = T[v.view_src];
      if (root->view_src != nullptr) {
        return fail(invalid(w + "view_src " + std::to_string(v.view_src) +
                            " is itself a view: view_src names the tensor that owns the memory"));
      }
      bp_tensor *a = src[0];
      if (a == nullptr) {
        t = strided_view(ctx, root, v, d.view_offs());
      } else if (v.op == BP_OP_VIEW) {
        const size_t base = offset_in_root(a);
        if (d.view_offs() < base) {
          return fail(invalid(w + "view_offs " + std::to_string(d.view_offs()) + " lies before its source, at " +
                              std::to_string(base)));
        }
        if (v.nb[0] != bp_type_size(v.type)) {
          return fail(invalid(w + "a VIEW's nb[0] is its element size " + std::to_string(bp_type_size(v.type)) +
                              ", not " + std::to_string(v.nb[0])));
        }
        t = bp_view_4d(ctx, a, v.ne[0], v.ne[1], v.ne[2], v.ne[3], v.nb[1], v.nb[2], v.nb[3], d.view_offs() - base);
      } else if (v.op == BP_OP_RESHAPE) {
        t = bp_reshape(ctx, a, BP_MAX_DIMS, v.ne);
      } else if (v.op == BP_OP_PERMUTE) {
        t = bp_permute(ctx, a, v.params[0], v.params[1], v.params[2], v.params[3]);
      } else {
        t = bp_transpose(ctx, a);
      }
    } else if (v.op == BP_OP_CONT) {
      if (v.n_params != 0) return fail(invalid(w + "CONT takes no op_params"));
      if (v.n_src != 1) return fail(invalid(w + "CONT takes 1 source, not " + std::to_string(v.n_src)));
      t = bp_cast(ctx, src[0], v.type);
    } else {
      t = bp_op_new(ctx, v.op, src, v.n_src, v.params, v.n_params);
    }
    if (t == nullptr) return fail(from_last_error(w));
    // The rebuilt node must be the one described: same type, shape, strides
    // and memory root.
    if (t->type != v.type || !std::equal(v.ne, v.ne + BP_MAX_DIMS, t->ne)) {
      return fail(invalid(w + "described as " + dims(v.ne) + " " + bp_type_name(v.type) + " but its sources give " +
                          dims(t->ne) + " " + bp_type_name(t->type)));
    }
    // Strides of one-element dims address nothing: only the others must agree.
    bool same_strides = true;
    for (int k = 0; k < BP_MAX_DIMS; ++k) same_strides = same_strides && (v.ne[k] == 1 || v.nb[k] == t->nb[k]);
    if (!same_strides) {
      return fail(invalid(w + "described with strides " + dims(v.nb) + " but the op gives " + dims(t->nb)));
    }
    if (t->view_src && !index_of.count(t->view_src))
      return fail(invalid(w + "aliases a tensor not in the description"));
    const int root = t->view_src ? index_of.at(t->view_src) : -1;
    if (root != v.view_src || (t->view_src && t->view_offs != d.view_offs())) {
      return fail(invalid(w + "described as aliasing tensor " + std::to_string(v.view_src) + " at byte " +
                          std::to_string(d.view_offs()) + " but the op aliases " + std::to_string(root) + " at " +
                          std::to_string(t->view_offs)));
    }
    if (!d.name().empty()) bp_tensor_set_name(t, d.name().c_str());
    if (d.flags() != 0) bp_tensor_set_flags(t, d.flags());
    if (place && t->view_src == nullptr) {
      if (d.buffer() == 0) return fail(invalid(w + "has no buffer: every leaf and op result needs memory"));
      auto it = s.buffers.find(d.buffer());
      if (it == s.buffers.end()) return fail(not_found(w + "buffer handle unknown in this session (freed?)"));
      const remote_buffer &b = *it->second;
      const uint64_t n = bp_tensor_nbytes(t);
      if (d.offset() > b.size || n > b.size - d.offset()) {
        return fail(invalid(w + std::to_string(n) + " bytes at offset " + std::to_string(d.offset()) +
                            " do not fit in its buffer of " + std::to_string(b.size) + " bytes"));
      }
      if (bp_buffer_place_tensor(b.buffer, t, d.offset()) != BP_OK) return fail(from_last_error(w));
      out->buffers.insert(d.buffer());
    }
    index_of.emplace(t, i);
    T.push_back(t);
  }
  return grpc::Status::OK;
}

}  // namespace bp::remote::server
