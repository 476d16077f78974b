// runner.cpp: runs one case on one backend. Context -> leaves and views ->
// op node -> graph -> one buffer for every tensor -> inputs -> supports_op
// check -> compute -> read back -> compare with the reference. Every API
// failure becomes a failed result carrying bp_last_error(); nothing throws
// out of run_case.

#include <cfloat>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "conformance/conformance.hpp"
#include "conformance/quant.hpp"

namespace bp::conformance {

const char *case_status_name(case_status s) {
  switch (s) {
    case case_status::passed:
      return "passed";
    case case_status::failed:
      return "failed";
    case case_status::unsupported:
      return "not supported";
  }
  return "?";
}

namespace {

struct ctx_deleter {
  void operator()(bp_context *c) const { bp_context_free(c); }
};
struct graph_deleter {
  void operator()(bp_graph *g) const { bp_graph_free(g); }
};
struct buffer_deleter {
  void operator()(bp_buffer *b) const { bp_buffer_free(b); }
};

uint64_t fnv1a(const std::string &s, uint64_t salt) {
  uint64_t h = 0xcbf29ce484222325ull ^ salt;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

std::string api_error(const std::string &what) {
  const char *e = bp_last_error();
  return what + ": " + (e && *e ? e : "(no message)");
}

std::string shape_str(const int64_t ne[4]) {
  return "[" + std::to_string(ne[0]) + "," + std::to_string(ne[1]) + "," + std::to_string(ne[2]) + "," +
         std::to_string(ne[3]) + "]";
}

// Leaf values as the bytes of |type|.
std::vector<uint8_t> to_bytes(const std::vector<double> &v, bp_type type) {
  std::vector<uint8_t> out(v.size() * bp_type_size(type));
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == BP_TYPE_F32) {
      const float f = static_cast<float>(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    } else if (type == BP_TYPE_F16) {
      const uint16_t h = bp_fp32_to_fp16(static_cast<float>(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      const int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(&out[i * 4], &x, 4);
    }
  }
  return out;
}

double element_at(const uint8_t *p, bp_type type) {
  if (type == BP_TYPE_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (type == BP_TYPE_F16) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bp_fp16_to_fp32(h);
  }
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// Reads |t| back in logical order using its own strides.
bool read_logical(const bp_tensor *t, std::vector<double> &out, std::string &err) {
  const size_t nbytes = bp_tensor_nbytes(t);
  std::vector<uint8_t> raw(nbytes);
  if (nbytes && bp_tensor_get(t, raw.data(), 0, nbytes) != BP_OK) {
    err = api_error("bp_tensor_get of the result");
    return false;
  }
  if (bp_type_is_quantized(t->type)) {
    // Results of a quantized type are whole contiguous tensors (a CONT node,
    // or the destination leaf of a CPY): read them block by block.
    if (!bp_tensor_is_contiguous(t)) {
      err = "a quantized result must be contiguous to be read back";
      return false;
    }
    out = dequantize_blocks(t->type, raw.data(), bp_tensor_nelements(t));
    return true;
  }
  out.clear();
  out.reserve(static_cast<size_t>(bp_tensor_nelements(t)));
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          out.push_back(
              element_at(raw.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], t->type));
  return true;
}

// Bytes of |n| elements of |type| laid out densely (whole blocks for a
// quantized type, which every view of one keeps to).
size_t bytes_of(bp_type type, int64_t n) { return bp_type_row_size(type, n); }

bp_tensor *apply_view(bp_context *ctx, bp_tensor *t, const view_step &s) {
  const bp_type ty = t->type;
  switch (s.what) {
    case view_step::kind::permute:
      return bp_permute(ctx, t, s.axes[0], s.axes[1], s.axes[2], s.axes[3]);
    case view_step::kind::transpose:
      return bp_transpose(ctx, t);
    case view_step::kind::view:
      return bp_view_4d(ctx, t, s.ne[0], s.ne[1], s.ne[2], s.ne[3], bytes_of(ty, s.stride[1]),
                        bytes_of(ty, s.stride[2]), bytes_of(ty, s.stride[3]), bytes_of(ty, s.offset));
  }
  return nullptr;
}

// The plugin |backend| comes from ("cpu", "vulkan", ...), or "".
std::string plugin_of(bp_backend *backend) {
  bp_device *dev = bp_backend_device(backend);
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (!dev || bp_device_describe(dev, &info) != BP_OK || !info.plugin) return "";
  const char *name = bp_plugin_name(info.plugin);
  // A remote device computes with the API of the plugin that serves it; its
  // name is "<that plugin>@<server>" (docs/plugins/remote.md).
  if (name && std::string(name) == "remote" && info.name && std::strchr(info.name, '@'))
    return std::string(info.name, std::strchr(info.name, '@'));
  return name ? name : "";
}

case_result run_case_unguarded(const case_desc &c, bp_backend *backend) {
  case_result r;
  r.op = c.op;
  r.name = c.name;
  r.max_nmse = c.max_nmse;
  auto fail = [&r](std::string msg) {
    r.status = case_status::failed;
    r.message = std::move(msg);
    return r;
  };
  if (!backend) return fail("no backend");

  std::unique_ptr<bp_context, ctx_deleter> ctx(bp_context_new(0));
  if (!ctx) return fail(api_error("bp_context_new"));

  // Leaves, their host values, and the operands the views make of them.
  const size_t n_in = c.inputs.size();
  std::vector<std::vector<double>> leaf_values(n_in);
  std::vector<std::vector<uint8_t>> leaf_bytes(n_in);
  std::vector<bp_tensor *> leaves(n_in), operands(n_in);
  std::vector<host_input> host(n_in);
  for (size_t k = 0; k < n_in; ++k) {
    const input_spec &in = c.inputs[k];
    bp_tensor *t = bp_tensor_new(ctx.get(), in.type, 4, in.ne);
    if (!t) return fail(api_error("creating input " + std::to_string(k)));
    bp_tensor_set_name(t, ("in" + std::to_string(k)).c_str());
    bp_tensor_set_flags(t, BP_TENSOR_FLAG_INPUT);
    leaves[k] = t;
    for (const view_step &s : in.views) {
      t = apply_view(ctx.get(), t, s);
      if (!t) return fail(api_error("making the view of input " + std::to_string(k)));
    }
    operands[k] = t;
    if (bp_type_is_quantized(in.type))
      leaf_bytes[k] = make_quantized_leaf(in, fnv1a(c.name, k), leaf_values[k]);
    else
      leaf_values[k] = make_leaf_values(in, fnv1a(c.name, k));
    host[k].type = in.type;
    host[k].layout = apply_views_on_host(in);
    host[k].leaf = &leaf_values[k];
    for (int d = 0; d < 4; ++d) host[k].leaf_ne[d] = in.ne[d];
    // The library's view of the operand must agree with ours (a quantized
    // dim 0 is dense: nb[0] is one block).
    for (int d = 0; d < 4; ++d) {
      const int64_t stride = host[k].layout.stride[d];
      const size_t want_nb = d == 0 ? bp_type_size(in.type) * static_cast<size_t>(stride) : bytes_of(in.type, stride);
      if (t->ne[d] != host[k].layout.ne[d] || (t->ne[d] > 1 && t->nb[d] != want_nb))
        return fail("input " + std::to_string(k) + " view: library gives ne " + shape_str(t->ne) +
                    ", the case expects " + shape_str(host[k].layout.ne) + " (or the strides differ)");
    }
  }

  bp_tensor *node = c.build(ctx.get(), operands, c.args);
  if (!node) return fail(api_error("building the op"));
  bp_tensor_set_flags(node, BP_TENSOR_FLAG_OUTPUT);

  std::unique_ptr<bp_graph, graph_deleter> graph(bp_graph_new(ctx.get(), 0));
  if (!graph) return fail(api_error("bp_graph_new"));
  if (bp_graph_build(graph.get(), node) != BP_OK) return fail(api_error("bp_graph_build"));

  std::unique_ptr<bp_buffer, buffer_deleter> weights;
  if (c.weight_buffer) {
    if (bp_buffer_type *wbt = bp_device_weight_buffer_type(bp_backend_device(backend))) {
      bp_buffer *raw = nullptr;
      if (bp_buffer_type_alloc(wbt, bp_buffer_type_alloc_size(wbt, leaves[0]), &raw) != BP_OK)
        return fail(api_error("allocating the weight buffer"));
      weights.reset(raw);
      if (bp_buffer_place_tensor(raw, leaves[0], 0) != BP_OK) return fail(api_error("bp_buffer_place_tensor"));
    } else {
      bp_clear_error();  // none: the default type, like every other case
    }
  }
  bp_buffer *raw_buf = nullptr;
  if (bp_context_alloc_tensors(ctx.get(), backend, &raw_buf) != BP_OK)
    return fail(api_error("bp_context_alloc_tensors"));
  std::unique_ptr<bp_buffer, buffer_deleter> buf(raw_buf);
  // All ones: NaN in f32/f16, so an output element the op never writes shows.
  if (buf && bp_buffer_clear(buf.get(), 0xff) != BP_OK) return fail(api_error("bp_buffer_clear"));
  for (size_t k = 0; k < n_in; ++k) {
    const std::vector<uint8_t> bytes =
        bp_type_is_quantized(c.inputs[k].type) ? leaf_bytes[k] : to_bytes(leaf_values[k], c.inputs[k].type);
    if (bp_tensor_set(leaves[k], bytes.data(), 0, bytes.size()) != BP_OK)
      return fail(api_error("bp_tensor_set of input " + std::to_string(k)));
  }

  for (size_t i = 0; i < bp_graph_node_count(graph.get()); ++i) {
    const bp_tensor *n = bp_graph_node(graph.get(), i);
    if (n && !bp_op_is_view(n->op) && !bp_backend_supports_op(backend, n)) {
      // Name what the backend refused: the op with its inputs' types and
      // shapes (an f16 weight is the usual cause), then the output.
      r.status = case_status::unsupported;
      r.message = std::string("backend does not support ") + bp_op_name(n->op) + " of";
      for (int k = 0; k < BP_MAX_SRC && n->src[k]; ++k)
        r.message += std::string(k ? "," : "") + " src" + std::to_string(k) + " " + bp_type_name(n->src[k]->type) +
                     " " + shape_str(n->src[k]->ne);
      r.message += std::string(" giving ") + bp_type_name(n->type) + " " + shape_str(n->ne);
      return r;
    }
  }

  if (bp_backend_graph_compute(backend, graph.get()) != BP_OK) return fail(api_error("bp_backend_graph_compute"));

  const bp_tensor *result = c.readback_input >= 0 ? leaves[static_cast<size_t>(c.readback_input)] : node;
  std::vector<double> got;
  std::string err;
  if (!read_logical(result, got, err)) return fail(err);

  op_args ref_args = c.args;
  ref_args.api = plugin_of(backend);
  const expected want = c.reference(host, ref_args);
  for (int d = 0; d < 4; ++d)
    if (result->ne[d] != want.ne[d])
      return fail("result shape " + shape_str(result->ne) + ", reference " + shape_str(want.ne));
  if (result->type != want.type)
    return fail(std::string("result type ") + bp_type_name(result->type) + ", reference " + bp_type_name(want.type));

  comparison cmp;
  if (want.tol.empty()) {
    cmp = compare_values(got, want, c.max_nmse, c.exact);
  } else {
    // The same inputs with every denormal flushed to a zero of its sign.
    expected flushed;
    if (c.denormals_may_flush) {
      std::vector<std::vector<double>> flushed_leaves = leaf_values;
      std::vector<host_input> flushed_host = host;
      for (size_t k = 0; k < n_in; ++k) {
        for (double &v : flushed_leaves[k])
          if (v != 0 && std::fabs(v) < FLT_MIN) v = std::copysign(0.0, v);
        flushed_host[k].leaf = &flushed_leaves[k];
      }
      flushed = c.reference(flushed_host, ref_args);
    }
    cmp = compare_elementwise(got, want, c.denormals_may_flush ? &flushed : nullptr);
  }
  r.compared = true;
  r.nmse = cmp.nmse;
  r.status = cmp.ok ? case_status::passed : case_status::failed;
  r.message = cmp.message;
  return r;
}

}  // namespace

case_result run_case(const case_desc &c, bp_backend *backend) {
  try {
    return run_case_unguarded(c, backend);
  } catch (const std::exception &e) {
    case_result r;
    r.op = c.op;
    r.name = c.name;
    r.max_nmse = c.max_nmse;
    r.message = std::string("exception in the conformance runner: ") + e.what();
    return r;
  }
}

}  // namespace bp::conformance
