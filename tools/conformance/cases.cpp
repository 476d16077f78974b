// cases.cpp: the whole case list, the operand layouts shared by every
// family, and the op filter.

#include <algorithm>

#include "conformance/cases_util.hpp"

namespace bp::conformance {

input_spec operand(bp_type type, shape ne, layout_kind lay, fill_spec fill) {
  input_spec in;
  in.type = type;
  in.fill = fill;
  for (int d = 0; d < 4; ++d) in.ne[d] = ne[d];
  switch (lay) {
    case layout_kind::contiguous:
      break;
    case layout_kind::transposed:
      std::swap(in.ne[0], in.ne[1]);
      in.views.push_back({view_step::kind::transpose, {0, 1, 2, 3}, {}, {}, 0});
      break;
    case layout_kind::permuted:
    case layout_kind::shuffled: {
      // Leaf dim i becomes logical dim axes[i], so the leaf's dim i has the
      // logical size of dim axes[i].
      const int axes[2][4] = {{0, 2, 1, 3}, {1, 3, 0, 2}};
      const int *ax = axes[lay == layout_kind::permuted ? 0 : 1];
      view_step s{view_step::kind::permute, {ax[0], ax[1], ax[2], ax[3]}, {}, {}, 0};
      for (int d = 0; d < 4; ++d) in.ne[d] = ne[ax[d]];
      in.views.push_back(s);
      break;
    }
    case layout_kind::strided: {
      // A window starting at row 1, column 2 of a leaf 3 wider and 1 taller,
      // so both the row stride and the offset differ from a dense tensor.
      // A quantized window moves by whole blocks: column one block in, a
      // leaf one block wider.
      const int64_t blck = bp_type_block_size(type);
      const int64_t pad = blck > 1 ? blck : 3, col = blck > 1 ? blck : 2;
      const int64_t l0 = ne[0] + pad, l1 = ne[1] + 1;
      in.ne[0] = l0;
      in.ne[1] = l1;
      view_step s;
      s.what = view_step::kind::view;
      for (int d = 0; d < 4; ++d) s.ne[d] = ne[d];
      s.stride[1] = l0;
      s.stride[2] = l0 * l1;
      s.stride[3] = l0 * l1 * ne[2];
      s.offset = l0 + col;
      in.views.push_back(s);
      break;
    }
  }
  return in;
}

std::string shape_name(const shape &ne) {
  return "[" + std::to_string(ne[0]) + "," + std::to_string(ne[1]) + "," + std::to_string(ne[2]) + "," +
         std::to_string(ne[3]) + "]";
}

std::string layout_name(layout_kind lay) {
  switch (lay) {
    case layout_kind::contiguous:
      return "";
    case layout_kind::transposed:
      return " transposed";
    case layout_kind::permuted:
      return " permuted";
    case layout_kind::shuffled:
      return " shuffled";
    case layout_kind::strided:
      return " strided";
  }
  return "";
}

std::string operand_name(bp_type type, const shape &ne, layout_kind lay) {
  return std::string(bp_type_name(type)) + " " + shape_name(ne) + layout_name(lay);
}

std::vector<std::string> conformance_ops() {
  return {"ADD",      "SUB",  "MUL",    "DIV",  "SCALE",     "CLAMP",    "NEG",     "ABS",
          "SQR",      "SQRT", "EXP",    "RELU", "GELU",      "SILU",     "TANH",    "SIGMOID",
          "SUM_ROWS", "MEAN", "ARGMAX", "NORM", "RMS_NORM",  "SOFT_MAX", "MUL_MAT", "GET_ROWS",
          "CPY",      "CONT", "CONCAT", "ROPE", "ATTENTION", "SET_ROWS"};
}

std::vector<case_desc> conformance_cases(const std::vector<std::string> &ops) {
  std::vector<case_desc> all;
  add_elementwise_cases(all);
  add_row_cases(all);
  add_mul_mat_cases(all);
  add_data_cases(all);
  add_rope_cases(all);
  add_attention_cases(all);
  add_special_cases(all);
  add_quant_cases(all);
  if (ops.empty()) return all;
  std::vector<case_desc> picked;
  for (auto &c : all)
    if (std::find(ops.begin(), ops.end(), c.op) != ops.end()) picked.push_back(std::move(c));
  return picked;
}

}  // namespace bp::conformance
