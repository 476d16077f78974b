// quant_cases.cpp: bp-bench's products with quantized weights (bench.hpp).
#include "bench.hpp"

namespace bp::bench {

std::vector<op_case> quant_cases() {
  std::vector<op_case> cases;
  for (bp_type t :
       {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16, BP_TYPE_F16,
        BP_TYPE_Q4_1, BP_TYPE_Q5_1, BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS, BP_TYPE_MXFP4}) {
    op_case c;
    c.op = op_kind::mul_mat, c.a_type = t, c.k = 4096, c.weights = true;
    // A decoder's 4096 x 4096 weight times one token, a few, and a prompt.
    for (int64_t n : {1, 8, 32, 512}) {
      c.m = 4096, c.n = n;
      cases.push_back(c);
    }
    // One token through weights 8x larger (72-256 MiB), in turn over copies
    // that together pass the last-level cache (backend_bench.cpp).
    c.m = 32768, c.n = 1;
    cases.push_back(c);
    // The file's layout beside the weight buffer's, for N = 1 and 512 (F16
    // stays in the default type either way: nothing to compare).
    for (int64_t n : {1, 512}) {
      if (t == BP_TYPE_F16) break;
      op_case p = c;
      p.m = 4096, p.n = n, p.plain = true;
      cases.push_back(p);
    }
  }
  return cases;
}

op_case quant_reference(const op_case &c) {
  op_case r = c;
  r.weights = false;  // named as the default run's f32 product, under "Quant/"
  if (!c.weights_from_dram()) r.a_type = BP_TYPE_F32;
  return r;
}

}  // namespace bp::bench
