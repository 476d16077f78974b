// cases_data.cpp: the ops that move data: GET_ROWS (f32, f16, i32 rows),
// CPY (f32 <-> f16, into permuted and strided destinations; the whole
// destination leaf is checked, so writes outside the view show), CONT of
// permuted and transposed views, bp_cast, and CONCAT along each dim.

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;
constexpr bp_type f32 = BP_TYPE_F32, f16 = BP_TYPE_F16, i32 = BP_TYPE_I32;

fill_spec values_for(bp_type t) { return t == i32 ? integers(-1000, 1000) : uniform(-3, 3); }

void add_get_rows(std::vector<case_desc> &out) {
  struct get_rows_case {
    shape a;    // [E, R, A2, A3]
    int64_t n;  // ids per matrix
    bp_type type;
    L la = L::contiguous, lids = L::contiguous;
  };
  const std::vector<get_rows_case> cases = {
      {{1, 1, 1, 1}, 1, f32},
      {{7, 5, 1, 1}, 3, f32},
      {{33, 9, 1, 1}, 7, f32},
      {{257, 3, 1, 1}, 5, f32},  // ids repeat
      {{7, 5, 3, 2}, 4, f32},
      {{33, 9, 1, 1}, 7, f16},
      {{7, 5, 3, 2}, 4, f16},
      {{33, 9, 1, 1}, 7, i32},
      {{7, 5, 3, 1}, 4, i32},
      {{33, 9, 2, 1}, 7, f32, L::strided, L::contiguous},
      {{7, 5, 3, 2}, 4, f16, L::permuted, L::strided},
      {{257, 100, 1, 1}, 67, f16},  // big: split over threads
      {{33, 100, 2, 1}, 513, f32, L::strided},
  };
  for (const get_rows_case &s : cases) {
    case_desc c;
    c.op = "GET_ROWS";
    const shape ids{s.n, s.a[2], s.a[3], 1};
    c.name = "GET_ROWS " + operand_name(s.type, s.a, s.la) + " ids " + operand_name(i32, ids, s.lids);
    c.exact = true;  // a copy (f16 -> f32 is exact)
    c.max_nmse = 0;
    c.inputs.push_back(operand(s.type, s.a, s.la, values_for(s.type)));
    c.inputs.push_back(operand(i32, ids, s.lids, integers(0, static_cast<double>(s.a[1] - 1))));
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return bp_get_rows(ctx, in[0], in[1]);
    };
    c.reference = ref::get_rows();
    out.push_back(std::move(c));
  }
}

void add_cpy(std::vector<case_desc> &out) {
  struct cpy_case {
    shape src;
    bp_type ts;
    L ls;
    shape dst;
    bp_type td;
    L ld;
  };
  const std::vector<cpy_case> cases = {
      {{1, 1, 1, 1}, f32, L::contiguous, {1, 1, 1, 1}, f16, L::contiguous},
      {{33, 7, 1, 1}, f32, L::contiguous, {33, 7, 1, 1}, f16, L::contiguous},
      {{33, 7, 1, 1}, f16, L::contiguous, {33, 7, 1, 1}, f32, L::contiguous},
      {{257, 3, 2, 1}, f32, L::contiguous, {257, 3, 2, 1}, f16, L::contiguous},
      {{33, 7, 1, 1}, f32, L::contiguous, {33, 7, 1, 1}, f32, L::transposed},
      {{7, 5, 3, 2}, f32, L::contiguous, {7, 5, 3, 2}, f32, L::shuffled},
      {{7, 5, 3, 2}, f32, L::permuted, {7, 5, 3, 2}, f16, L::strided},
      {{33, 7, 1, 1}, f16, L::transposed, {33, 7, 1, 1}, f32, L::strided},
      {{33, 7, 1, 1}, f32, L::contiguous, {7, 33, 1, 1}, f32, L::contiguous},  // same count, other shape
      {{7, 5, 3, 1}, i32, L::transposed, {7, 5, 3, 1}, i32, L::permuted},
      {{257, 67, 1, 1}, f32, L::contiguous, {257, 67, 1, 1}, f16, L::transposed},  // big
      {{7, 2053, 2, 1}, f16, L::strided, {7, 2053, 2, 1}, f32, L::shuffled},
      {{33, 7, 1, 1}, f16, L::contiguous, {33, 7, 1, 1}, f16, L::transposed},  // f16 -> f16: bit-exact
      {{7, 5, 3, 2}, f16, L::permuted, {7, 5, 3, 2}, f16, L::strided},
  };
  for (const cpy_case &s : cases) {
    case_desc c;
    c.op = "CPY";
    c.name = "CPY " + operand_name(s.ts, s.src, s.ls) + " -> " + operand_name(s.td, s.dst, s.ld);
    c.exact = s.ts == s.td;  // same type: a bit-exact copy
    c.max_nmse = k_tol_convert;
    c.inputs.push_back(operand(s.ts, s.src, s.ls, values_for(s.ts)));
    c.inputs.push_back(operand(s.td, s.dst, s.ld, values_for(s.td)));
    c.readback_input = 1;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return bp_cpy(ctx, in[0], in[1]);
    };
    c.reference = ref::cpy_into_leaf();
    out.push_back(std::move(c));
  }
}

// SET_ROWS: f32 rows into f32 or f16 destinations, dense and strided (a
// window of a longer leaf, as a KV cache view is), one row (a decode step's
// write) to all of them in shuffled order; the ids are distinct, so the
// result does not depend on the order rows are written in.
void add_set_rows(std::vector<case_desc> &out) {
  struct set_rows_case {
    shape src;
    int64_t rows;  // dst's dim 1
    bp_type td;
    L ld;
  };
  const std::vector<set_rows_case> cases = {
      {{16, 3, 1, 1}, 10, f16, L::contiguous},  {{64, 1, 1, 1}, 128, f32, L::contiguous},
      {{64, 1, 1, 1}, 128, f16, L::strided},    {{7, 5, 3, 2}, 9, f32, L::strided},
      {{33, 20, 1, 1}, 20, f16, L::contiguous}, {{257, 6, 2, 1}, 31, f32, L::contiguous},
  };
  for (const set_rows_case &s : cases) {
    case_desc c;
    c.op = "SET_ROWS";
    const shape dst{s.src[0], s.rows, s.src[2], s.src[3]};
    c.name = "SET_ROWS " + operand_name(f32, s.src, L::contiguous) + " -> " + operand_name(s.td, dst, s.ld);
    c.exact = s.td == f32;
    c.max_nmse = k_tol_convert;
    c.inputs.push_back(operand(f32, s.src, L::contiguous, values_for(f32)));
    c.inputs.push_back(operand(s.td, dst, s.ld, values_for(s.td)));
    const double last = static_cast<double>(s.rows - 1);  // one row: anywhere; more: distinct
    c.inputs.push_back(
        operand(i32, {s.src[1], 1, 1, 1}, L::contiguous, s.src[1] == 1 ? integers(0, last) : distinct(0, last)));
    c.readback_input = 1;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return bp_set_rows(ctx, in[1], in[0], in[2]);
    };
    c.reference = ref::set_rows_into_leaf();
    out.push_back(std::move(c));
  }
}

void add_cont(std::vector<case_desc> &out) {
  struct cont_case {
    shape ne;
    bp_type from;
    L lay;
    bool cast;
    bp_type to;
  };
  const std::vector<cont_case> cases = {
      {{33, 7, 1, 1}, f32, L::transposed, false, f32},   {{7, 5, 3, 2}, f32, L::permuted, false, f32},
      {{7, 5, 3, 2}, f32, L::shuffled, false, f32},      {{257, 3, 2, 1}, f32, L::strided, false, f32},
      {{33, 7, 1, 1}, f16, L::transposed, false, f16},   {{7, 5, 3, 2}, i32, L::shuffled, false, i32},
      {{1, 1, 1, 1}, f32, L::contiguous, true, f16},     {{33, 7, 1, 1}, f32, L::contiguous, true, f16},
      {{33, 7, 1, 1}, f16, L::contiguous, true, f32},    {{33, 7, 3, 1}, f32, L::transposed, true, f16},
      {{7, 5, 3, 2}, f16, L::shuffled, true, f32},       {{257, 3, 1, 1}, f32, L::strided, true, f32},
      {{257, 67, 1, 1}, f32, L::transposed, false, f32},  // big
      {{7, 2053, 2, 1}, f32, L::shuffled, true, f16},
  };
  for (const cont_case &s : cases) {
    case_desc c;
    c.op = "CONT";
    c.name = std::string(s.cast ? "CONT cast to " : "CONT ") + (s.cast ? bp_type_name(s.to) : "") +
             (s.cast ? " " : "") + operand_name(s.from, s.ne, s.lay);
    c.exact = s.from == s.to;
    c.max_nmse = k_tol_convert;
    c.inputs.push_back(operand(s.from, s.ne, s.lay, values_for(s.from)));
    c.args.type = s.to;
    if (s.cast) {
      c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
        return bp_cast(ctx, in[0], a.type);
      };
    } else {
      c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
        return bp_cont(ctx, in[0]);
      };
    }
    c.reference = ref::cont();
    out.push_back(std::move(c));
  }
}

void add_concat(std::vector<case_desc> &out) {
  struct concat_case {
    shape a;
    int dim;
    int64_t nb;  // b's size in |dim|
    bp_type type = f32;
    L la = L::contiguous, lb = L::contiguous;
  };
  const std::vector<concat_case> cases = {
      {{1, 1, 1, 1}, 0, 1},
      {{7, 5, 3, 2}, 0, 4},
      {{7, 5, 3, 2}, 1, 4},
      {{7, 5, 3, 2}, 2, 1},
      {{7, 5, 3, 2}, 3, 3},
      {{257, 1, 1, 1}, 0, 33},
      {{33, 7, 1, 1}, 1, 7, f16},
      {{7, 5, 3, 2}, 2, 4, i32},
      {{33, 7, 1, 1}, 0, 7, f32, L::transposed, L::contiguous},
      {{7, 5, 3, 2}, 1, 2, f32, L::strided, L::permuted},
      {{7, 5, 3, 2}, 3, 2, f16, L::shuffled, L::transposed},
      {{257, 67, 1, 1}, 1, 66, f32},  // big
      {{7, 2053, 2, 1}, 0, 5, f32, L::strided, L::transposed},
  };
  for (const concat_case &s : cases) {
    case_desc c;
    c.op = "CONCAT";
    shape b = s.a;
    b[s.dim] = s.nb;
    c.name = "CONCAT dim " + std::to_string(s.dim) + " " + operand_name(s.type, s.a, s.la) + " , " +
             operand_name(s.type, b, s.lb);
    c.exact = true;  // a copy
    c.inputs.push_back(operand(s.type, s.a, s.la, values_for(s.type)));
    c.inputs.push_back(operand(s.type, b, s.lb, values_for(s.type)));
    c.args.i[0] = s.dim;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
      return bp_concat(ctx, in[0], in[1], a.i[0]);
    };
    c.reference = ref::concat();
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_data_cases(std::vector<case_desc> &out) {
  add_get_rows(out);
  add_cpy(out);
  add_cont(out);
  add_concat(out);
  add_set_rows(out);
}

}  // namespace bp::conformance
