// cases_attention.cpp: ATTENTION (bp_attention) with f32 and f16 keys and
// values; one token (a decode step) and many; query heads sharing key heads
// (GQA) and not; value rows shorter than key rows; causal, additive and
// broadcast masks, a mask with more rows than tokens, and rows masked
// entirely (zeros); batches that share keys; queries permuted as a model
// makes them and keys/values as strided windows of a longer cache; batches
// sharing one set of keys; and
// scores beyond exp's f32 range, which only the running maximum keeps finite.

#include <cmath>
#include <cstdio>
#include <string>

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;

enum class mask_kind { none, causal, additive, broadcast_heads };

struct attention_case {
  int64_t D, Dv, T, H, Hk, N, B = 1;
  bp_type kv = BP_TYPE_F16;
  mask_kind mask = mask_kind::none;
  int64_t mask_rows = 0;  // > T: a padded mask
  L q_lay = L::contiguous, kv_lay = L::contiguous;
  double range = 1.0;  // q and k uniform in [-range, range]
  float scale = 0.0f;  // 0: 1 / sqrt(D)
  std::string note = {};
  int64_t kv_B = 0;  // > 0: keys and values of this many batches, shared by the query batches
};

}  // namespace

void add_attention_cases(std::vector<case_desc> &out) {
  const std::vector<attention_case> cases = {
      {64, 64, 1, 4, 4, 7},                                        // one token, no mask
      {64, 64, 1, 8, 2, 37, 1, BP_TYPE_F16, mask_kind::additive},  // decode with GQA
      {32, 32, 7, 3, 3, 9, 1, BP_TYPE_F32, mask_kind::causal},     // a prompt, f32 cache
      {64, 64, 5, 8, 2, 13, 1, BP_TYPE_F16, mask_kind::causal, 0, L::permuted, L::strided, 1.0, 0.0f, " as a model"},
      {32, 16, 4, 2, 1, 11, 1, BP_TYPE_F32, mask_kind::additive},        // Dv < D, one key head
      {16, 16, 3, 4, 2, 5, 2, BP_TYPE_F16, mask_kind::broadcast_heads},  // batch of 2
      {16, 16, 6, 2, 2, 4, 1, BP_TYPE_F32, mask_kind::causal, 0, L::contiguous, L::contiguous, 1.0, 0.0f,
       " rows 0-1 fully masked"},                                     // T > N: the first rows see no key
      {32, 32, 3, 2, 2, 6, 1, BP_TYPE_F16, mask_kind::causal, 8},     // mask padded to 8 rows
      {128, 128, 2, 2, 1, 300, 1, BP_TYPE_F16, mask_kind::additive},  // many keys: several blocks
      {128, 128, 3, 2, 2, 50, 1, BP_TYPE_F32, mask_kind::none, 0, L::contiguous, L::contiguous, 4.0, 1.0f,
       " scores beyond exp's range"},
      {80, 80, 2, 5, 5, 33, 1, BP_TYPE_F16, mask_kind::causal, 0, L::contiguous, L::contiguous, 1.0, 0.3f,
       " odd head size"},
      {32, 32, 3, 4, 2, 9, 2, BP_TYPE_F16, mask_kind::causal, 0, L::contiguous, L::contiguous, 1.0, 0.0f,
       " batches share keys", 1},
      // Six query heads on one key head: groups of four and two; 70 keys, two blocks.
      {64, 64, 3, 6, 1, 70, 1, BP_TYPE_F16, mask_kind::causal, 0, L::contiguous, L::contiguous, 1.0, 0.0f,
       " heads 4 + 2 per key head"},
      // Four heads per key head, each with a mask of its own (m2 = 2).
      {16, 16, 2, 8, 2, 9, 1, BP_TYPE_F32, mask_kind::broadcast_heads},
      // Prompts past one tile of 8 query rows (vulkan's attention_tile): 20
      // rows in three tiles, the last one partial, keys in two blocks of 32
      // and a tail; 11 rows of Dv < D in two batches.
      {64, 64, 20, 4, 2, 45, 1, BP_TYPE_F16, mask_kind::causal, 0, L::contiguous, L::contiguous, 1.0, 0.0f,
       " three query tiles"},
      {128, 96, 11, 2, 1, 40, 2, BP_TYPE_F32, mask_kind::additive, 0, L::contiguous, L::contiguous, 1.0, 0.0f,
       " two query tiles, Dv < D"},
      // A decode step over a long cache (vulkan splits it over runs of keys).
      {64, 64, 1, 8, 2, 700, 1, BP_TYPE_F16, mask_kind::additive, 0, L::contiguous, L::contiguous, 1.0, 0.0f,
       " long cache"},
  };
  for (const attention_case &s : cases) {
    const float scale = s.scale != 0.0f ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.D));
    const int64_t kv_B = s.kv_B > 0 ? s.kv_B : s.B;
    const shape q{s.D, s.T, s.H, s.B}, k{s.D, s.N, s.Hk, kv_B}, v{s.Dv, s.N, s.Hk, kv_B};
    case_desc c;
    c.op = "ATTENTION";
    c.name = "ATTENTION q " + operand_name(BP_TYPE_F32, q, s.q_lay) + " k " + operand_name(s.kv, k, s.kv_lay) + " v " +
             operand_name(s.kv, v, s.kv_lay);
    c.max_nmse = k_tol_f32_complex;
    c.inputs.push_back(operand(BP_TYPE_F32, q, s.q_lay, uniform(-s.range, s.range)));
    c.inputs.push_back(operand(s.kv, k, s.kv_lay, uniform(-s.range, s.range)));
    c.inputs.push_back(operand(s.kv, v, s.kv_lay, uniform(-1, 1)));
    const int64_t rows = s.mask_rows > 0 ? s.mask_rows : s.T;
    switch (s.mask) {
      case mask_kind::none:
        break;
      case mask_kind::causal:
        c.inputs.push_back(operand(BP_TYPE_F32, {s.N, rows, 1, 1}, L::contiguous, causal_mask()));
        c.name += " causal mask";
        break;
      case mask_kind::additive:
        c.inputs.push_back(operand(BP_TYPE_F32, {s.N, rows, 1, 1}, L::contiguous, uniform(-3, 0)));
        c.name += " mask";
        break;
      case mask_kind::broadcast_heads:  // a mask per head pair, shared by the batch
        c.inputs.push_back(operand(BP_TYPE_F32, {s.N, rows, 2, 1}, L::contiguous, uniform(-3, 0)));
        c.name += " mask per head";
        break;
    }
    if (s.mask_rows > 0) c.name += " [" + std::to_string(s.mask_rows) + " rows]";
    char buf[32];
    std::snprintf(buf, sizeof buf, " scale %g", static_cast<double>(scale));
    c.name += buf + s.note;
    c.args.f[0] = scale;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
      return bp_attention(ctx, in[0], in[1], in[2], in.size() > 3 ? in[3] : nullptr, a.f[0]);
    };
    c.reference = ref::attention();
    out.push_back(std::move(c));
  }
}

}  // namespace bp::conformance
