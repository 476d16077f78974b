// cases.cpp: the cases a plain bp-bench runs (default_cases) and the cases'
// names (op_case::group, op_case::shape).
#include <string>

#include "bench.hpp"

namespace bp::bench {

std::string op_case::group() const {
  // Tensors past every cache get their own group name ("ADD_dram"), so a
  // filter such as '^ADD/' keeps selecting the in-cache case alone.
  const std::string dram = ne0 * ne1 * 4 >= kDramCaseBytes ? "_dram" : "";
  switch (op) {
    case op_kind::mul_mat:
      if (weights || bp_type_is_quantized(a_type))
        return std::string("Quant/MUL_MAT_") + bp_type_name(a_type) + (weights_from_dram() ? "_dram" : "") +
               (plain ? "_plain" : "");
      return a_type == BP_TYPE_F16 ? "MUL_MAT_f16xf32" : "MUL_MAT_f32";
    case op_kind::rms_norm:
      return "RMS_NORM" + dram;
    case op_kind::norm:
      return "NORM" + dram;
    case op_kind::soft_max:
      return "SOFT_MAX" + dram;
    case op_kind::add:
      return "ADD" + dram;
    case op_kind::mul:
      return "MUL" + dram;
    case op_kind::scale:
      return "SCALE" + dram;
    case op_kind::silu:
      return "SILU" + dram;
    case op_kind::gelu:
      return "GELU" + dram;
  }
  return "?";
}

std::string op_case::shape() const {
  if (op == op_kind::mul_mat) return "M=" + std::to_string(m) + ",N=" + std::to_string(n) + ",K=" + std::to_string(k);
  return std::to_string(ne0) + "x" + std::to_string(ne1);
}

std::vector<op_case> default_cases() {
  std::vector<op_case> cases;
  auto mul_mat = [&](bp_type t, int64_t m, int64_t n, int64_t k) {
    op_case c;
    c.op = op_kind::mul_mat, c.a_type = t, c.m = m, c.n = n, c.k = k;
    cases.push_back(c);
  };
  for (int64_t s : {128, 256, 512, 1024, 2048}) mul_mat(BP_TYPE_F32, s, s, s);
  // A decoder's shapes: a 4096 x 4096 weight times 1..32 tokens. N <= 4 is
  // bound by streaming the 64 MiB (f32) or 32 MiB (f16) of weights.
  for (int64_t n : {1, 2, 4, 8, 16, 32}) mul_mat(BP_TYPE_F32, 4096, n, 4096);
  // bp-run's demo layer (dim 256, ff 512, 32 tokens): products this small
  // are where a device's fixed cost per dispatch shows.
  mul_mat(BP_TYPE_F32, 256, 32, 256);
  mul_mat(BP_TYPE_F32, 512, 32, 256);
  for (int64_t s : {512, 1024}) mul_mat(BP_TYPE_F16, s, s, s);
  for (int64_t n : {1, 2, 4, 8, 16, 32}) mul_mat(BP_TYPE_F16, 4096, n, 4096);
  // Row ops (SILU and GELU: a feed-forward layer's activations) at 8 MiB
  // (inside this machine's L3), then at 64 MiB per tensor
  // (DRAM: what a model's activations at long context cost).
  for (int64_t rows : {512, 4096})
    for (op_kind k : {op_kind::rms_norm, op_kind::norm, op_kind::soft_max, op_kind::add, op_kind::mul, op_kind::scale,
                      op_kind::silu, op_kind::gelu}) {
      if (rows == 512 && (k == op_kind::norm || k == op_kind::mul || k == op_kind::scale)) continue;
      op_case c;
      c.op = k, c.ne0 = 4096, c.ne1 = rows;
      cases.push_back(c);
    }
  return cases;
}

}  // namespace bp::bench
