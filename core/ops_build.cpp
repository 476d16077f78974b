// ops_build.cpp: the public op builders of backplane.h (bp_add .. bp_rope_ext,
// and bp_op_new, the generic one). Each packs its parameters and hands over
// to the op table (ops::build), so every rule lives in one place.
#include <cstring>
#include <string>

#include "core/ops_internal.hpp"

namespace {

using bp::core::api_guard_ptr;
using bp::core::ops::build;

int32_t f32_bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

bp_tensor *op1(bp_context *ctx, bp_op op, bp_tensor *a, const int32_t *params = nullptr) {
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *src[1] = {a};
    return build(ctx, op, src, 1, params, bp::core::ops::info(op).builder);
  });
}

bp_tensor *op2(bp_context *ctx, bp_op op, bp_tensor *a, bp_tensor *b, const int32_t *params = nullptr) {
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *src[2] = {a, b};
    return build(ctx, op, src, 2, params, bp::core::ops::info(op).builder);
  });
}

}  // namespace

extern "C" {

BP_API bp_tensor *bp_add(bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_ADD, a, b);
}
BP_API bp_tensor *bp_sub(bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_SUB, a, b);
}
BP_API bp_tensor *bp_mul(bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_MUL, a, b);
}
BP_API bp_tensor *bp_div(bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_DIV, a, b);
}

BP_API bp_tensor *bp_scale(bp_context *ctx, bp_tensor *a, float s) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {f32_bits(s)};
  return op1(ctx, BP_OP_SCALE, a, p);
}

BP_API bp_tensor *bp_clamp(bp_context *ctx, bp_tensor *a, float min, float max) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {f32_bits(min), f32_bits(max)};
  return op1(ctx, BP_OP_CLAMP, a, p);
}

BP_API bp_tensor *bp_unary(bp_context *ctx, bp_tensor *a, bp_op op) {
  BP_API_SCOPE();
  if (ctx == nullptr || a == nullptr) {  // the NULL rule comes before the op check, as in every builder
    return bp::core::build_guard(ctx, [&] { return bp::core::null_input("bp_unary", ctx ? "a" : "ctx"); });
  }
  const int op_value = bp::core::enum_value(op);
  if (op_value < BP_OP_NEG || op_value > BP_OP_SIGMOID) {
    bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT,
                         "bp_unary: op %d (%s) is not a unary op: use one of BP_OP_NEG .. BP_OP_SIGMOID", op_value,
                         bp::core::ops::op_name(op_value));
    return nullptr;
  }
  return op1(ctx, op, a);
}

BP_API bp_tensor *bp_neg(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_NEG, a);
}
BP_API bp_tensor *bp_abs(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_ABS, a);
}
BP_API bp_tensor *bp_sqr(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_SQR, a);
}
BP_API bp_tensor *bp_sqrt(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_SQRT, a);
}
BP_API bp_tensor *bp_exp(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_EXP, a);
}
BP_API bp_tensor *bp_relu(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_RELU, a);
}
BP_API bp_tensor *bp_gelu(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_GELU, a);
}
BP_API bp_tensor *bp_silu(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_SILU, a);
}
BP_API bp_tensor *bp_tanh(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_TANH, a);
}
BP_API bp_tensor *bp_sigmoid(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_SIGMOID, a);
}
BP_API bp_tensor *bp_sum_rows(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_SUM_ROWS, a);
}
BP_API bp_tensor *bp_mean(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_MEAN, a);
}
BP_API bp_tensor *bp_argmax(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return op1(ctx, BP_OP_ARGMAX, a);
}

BP_API bp_tensor *bp_norm(bp_context *ctx, bp_tensor *a, float eps) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {f32_bits(eps)};
  return op1(ctx, BP_OP_NORM, a, p);
}

BP_API bp_tensor *bp_rms_norm(bp_context *ctx, bp_tensor *a, float eps) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {f32_bits(eps)};
  return op1(ctx, BP_OP_RMS_NORM, a, p);
}

BP_API bp_tensor *bp_soft_max(bp_context *ctx, bp_tensor *a, bp_tensor *mask, float scale) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {f32_bits(scale)};
  return op2(ctx, BP_OP_SOFT_MAX, a, mask, p);
}

BP_API bp_tensor *bp_mul_mat(bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_MUL_MAT, a, b);
}

BP_API bp_tensor *bp_get_rows(bp_context *ctx, bp_tensor *a, bp_tensor *ids) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_GET_ROWS, a, ids);
}

BP_API bp_tensor *bp_cpy(bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  BP_API_SCOPE();
  return op2(ctx, BP_OP_CPY, a, b);
}

BP_API bp_tensor *bp_cont(bp_context *ctx, bp_tensor *a) {
  BP_API_SCOPE();
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *src[1] = {a};
    return build(ctx, BP_OP_CONT, src, 1, nullptr, "bp_cont", a ? bp::core::enum_value(a->type) : BP_TYPE_F32);
  });
}

BP_API bp_tensor *bp_cast(bp_context *ctx, bp_tensor *a, bp_type type) {
  BP_API_SCOPE();
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *src[1] = {a};
    return build(ctx, BP_OP_CONT, src, 1, nullptr, "bp_cast", bp::core::enum_value(type));
  });
}

BP_API bp_tensor *bp_concat(bp_context *ctx, bp_tensor *a, bp_tensor *b, int dim) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {dim};
  return op2(ctx, BP_OP_CONCAT, a, b, p);
}

BP_API bp_tensor *bp_rope(bp_context *ctx, bp_tensor *a, bp_tensor *pos, int n_dims, int mode, float freq_base,
                          float freq_scale) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {n_dims, mode, f32_bits(freq_base), f32_bits(freq_scale)};
  return op2(ctx, BP_OP_ROPE, a, pos, p);
}

BP_API bp_tensor *bp_rope_ext(bp_context *ctx, bp_tensor *a, bp_tensor *pos, bp_tensor *freq_factors, int n_dims,
                              int mode, float freq_base, float freq_scale) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {n_dims, mode, f32_bits(freq_base), f32_bits(freq_scale)};
  // Without factors the node is bp_rope's (two sources), so plugins and
  // serialisers that predate the third source see nothing new.
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *src[3] = {a, pos, freq_factors};
    return build(ctx, BP_OP_ROPE, src, freq_factors ? 3 : 2, p, "bp_rope_ext");
  });
}

BP_API bp_tensor *bp_attention(bp_context *ctx, bp_tensor *q, bp_tensor *k, bp_tensor *v, bp_tensor *mask,
                               float scale) {
  BP_API_SCOPE();
  int32_t p[BP_MAX_OP_PARAMS] = {f32_bits(scale)};
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *src[4] = {q, k, v, mask};
    return build(ctx, BP_OP_ATTENTION, src, mask ? 4 : 3, p, "bp_attention");
  });
}

BP_API bp_tensor *bp_set_rows(bp_context *ctx, bp_tensor *dst, bp_tensor *src, bp_tensor *ids) {
  BP_API_SCOPE();
  return bp::core::build_guard(ctx, [&] {
    bp_tensor *s[3] = {src, dst, ids};
    return build(ctx, BP_OP_SET_ROWS, s, 3, nullptr, "bp_set_rows");
  });
}

// The generic builder: the caller names the op (a program that rebuilds a
// graph from a description, such as bp-serve). The checks a typed builder
// gets from its signature (the op, the source count, the parameter words)
// are made here; everything else is the op's rule, as for the typed builder.
BP_API bp_tensor *bp_op_new(bp_context *ctx, bp_op op, bp_tensor *const *src, int n_src, const int32_t *params,
                            int n_params) {
  BP_API_SCOPE();
  return bp::core::build_guard(ctx, [&]() -> bp_tensor * {
    using bp::core::set_errorf;
    if (!bp::core::context_usable(ctx, "bp_op_new")) return nullptr;
    const int op_value = bp::core::enum_value(op);
    if (op_value < 0 || op_value >= BP_OP_COUNT) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_op_new: unknown op %d: use a bp_op below BP_OP_COUNT (%d)", op_value,
                 BP_OP_COUNT);
      return nullptr;
    }
    const auto &oi = bp::core::ops::info(op);
    if (bp_op_is_view(op)) {
      set_errorf(BP_ERR_INVALID_ARGUMENT,
                 "bp_op_new: %s is a leaf or a view, not a computed op: build it with bp_tensor_new, bp_view_4d, "
                 "bp_reshape, bp_permute or bp_transpose",
                 oi.name);
      return nullptr;
    }
    const std::string fn = std::string("bp_op_new(") + oi.name + ")";
    if (n_src < oi.n_src_min || n_src > oi.n_src_max) {
      if (oi.n_src_min == oi.n_src_max) {
        set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %d sources given but %s takes %d", fn.c_str(), n_src, oi.name,
                   oi.n_src_min);
      } else {
        set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %d sources given but %s takes %d to %d", fn.c_str(), n_src, oi.name,
                   oi.n_src_min, oi.n_src_max);
      }
      return nullptr;
    }
    if (src == nullptr) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: src is NULL but %d sources were given", fn.c_str(), n_src);
      return nullptr;
    }
    const int words = bp::core::ops::param_words(op);
    if (n_params < 0 || n_params > words) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %d parameter words given but %s reads %d (docs/ops.md)", fn.c_str(),
                 n_params, oi.name, words);
      return nullptr;
    }
    if (n_params > 0 && params == nullptr) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: params is NULL but n_params is %d", fn.c_str(), n_params);
      return nullptr;
    }
    int32_t p[BP_MAX_OP_PARAMS] = {};
    if (n_params > 0) std::memcpy(p, params, sizeof(int32_t) * static_cast<size_t>(n_params));
    // CONT keeps its source's type here, as bp_cont does (bp_cast converts).
    const int requested = op == BP_OP_CONT && src[0] ? bp::core::enum_value(src[0]->type) : BP_TYPE_F32;
    return build(ctx, op, src, n_src, p, oi.builder, requested);
  });
}

}  // extern "C"
