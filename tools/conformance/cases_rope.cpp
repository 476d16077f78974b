// cases_rope.cpp: ROPE in normal and NeoX order, n_dims equal to and below
// the row length, other bases and frequency scales, batches, and operands
// that are permuted (the usual [D, T, H] -> [D, H, T] of attention) or
// strided; and frequency factors (bp_rope_ext), as many as the pairs or
// more (only the first n_dims/2 count), spread from 1 to 8.5.

#include <cstdio>
#include <string>

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;

struct rope_case {
  shape a;  // [D, H, T, B]
  int n_dims;
  float base = 10000.0f, scale = 1.0f;
  L lay = L::contiguous;
  int64_t n_factors = 0;  // > 0: frequency factors [n_factors]
};

}  // namespace

void add_rope_cases(std::vector<case_desc> &out) {
  const std::vector<rope_case> cases = {
      {{2, 1, 1, 1}, 2},
      {{8, 3, 7, 1}, 8},
      {{8, 3, 7, 1}, 4},
      {{64, 2, 5, 1}, 64},
      {{8, 2, 33, 1}, 6},
      {{64, 7, 37, 1}, 48},  // big: split over threads (259 rows)
      {{128, 4, 33, 2}, 128, 10000.0f, 1.0f, L::permuted},
      {{128, 2, 5, 2}, 96, 10000.0f, 0.5f},
      {{34, 3, 7, 1}, 34, 500.0f},
      {{32, 4, 7, 1}, 16, 10000.0f, 1.0f, L::permuted},
      {{16, 3, 5, 2}, 16, 10000.0f, 1.0f, L::strided},
      // Frequency factors (LLaMA 3.1's rope_freqs), shuffled and evenly
      // spread over [1, 8.5]: 16 of them step by 0.5, so 1, 4 and 8.5 all occur.
      {{32, 3, 7, 1}, 32, 10000.0f, 1.0f, L::contiguous, 16},
      {{64, 2, 5, 1}, 48, 10000.0f, 1.0f, L::contiguous, 24},
      {{128, 4, 9, 2}, 96, 500000.0f, 1.0f, L::contiguous, 64},  // more factors than pairs
      {{128, 2, 5, 1}, 128, 500000.0f, 0.5f, L::contiguous, 64},
      {{32, 4, 7, 1}, 16, 10000.0f, 1.0f, L::permuted, 8},
      {{16, 3, 5, 2}, 12, 10000.0f, 1.0f, L::strided, 6},
  };
  for (int mode : {BP_ROPE_NORMAL, BP_ROPE_NEOX}) {
    for (const rope_case &s : cases) {
      case_desc c;
      c.op = "ROPE";
      char params[96];
      std::snprintf(params, sizeof params, " n_dims %d base %g scale %g ", s.n_dims, static_cast<double>(s.base),
                    static_cast<double>(s.scale));
      std::string factors;
      if (s.n_factors > 0) factors = "freq_factors [" + std::to_string(s.n_factors) + "] ";
      c.name = std::string("ROPE ") + (mode == BP_ROPE_NEOX ? "neox" : "normal") + params + factors +
               operand_name(BP_TYPE_F32, s.a, s.lay);
      c.max_nmse = k_tol_f32_complex;
      c.inputs.push_back(operand(BP_TYPE_F32, s.a, s.lay, uniform(-1, 1)));
      c.inputs.push_back(operand(BP_TYPE_I32, {s.a[2], 1, 1, 1}, L::contiguous, integers(0, 40)));
      if (s.n_factors > 0)
        c.inputs.push_back(operand(BP_TYPE_F32, {s.n_factors, 1, 1, 1}, L::contiguous, distinct(1.0, 8.5)));
      c.args.i[0] = s.n_dims;
      c.args.i[1] = mode;
      c.args.f[2] = s.base;
      c.args.f[3] = s.scale;
      c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
        if (in.size() > 2) return bp_rope_ext(ctx, in[0], in[1], in[2], a.i[0], a.i[1], a.f[2], a.f[3]);
        return bp_rope(ctx, in[0], in[1], a.i[0], a.i[1], a.f[2], a.f[3]);
      };
      c.reference = ref::rope();
      out.push_back(std::move(c));
    }
  }
}

}  // namespace bp::conformance
