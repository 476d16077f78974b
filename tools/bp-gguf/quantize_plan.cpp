// quantize_plan.cpp: reads the input of bp-gguf quantize: the model's facts
// the rules need, every tensor in llama.cpp's order with its chosen type, its
// bytes in and out and its place in the output.
#include <algorithm>
#include <stdexcept>

#include "quantize.hpp"

namespace bp::gguf_tool {

namespace {

bool read_int(const bp_gguf *file, const std::string &key, int &out) {
  size_t i = 0;
  if (bp_gguf_find_key(file, key.c_str(), &i) != BP_OK) return false;
  int64_t v = 0;
  if (bp_gguf_kv_read_int(file, i, 0, &v) != BP_OK) return false;  // element 0 of a per-layer array
  out = static_cast<int>(v);
  return true;
}

model_facts read_facts(const bp_gguf *file) {
  model_facts f;
  size_t i = 0;
  const char *data = nullptr;
  uint64_t len = 0;
  if (bp_gguf_find_key(file, "general.architecture", &i) == BP_OK &&
      bp_gguf_kv_read_string(file, i, 0, &data, &len) == BP_OK) {
    f.arch.assign(data, len);
  }
  read_int(file, f.arch + ".block_count", f.n_layer);
  read_int(file, f.arch + ".attention.head_count", f.n_head);
  if (!read_int(file, f.arch + ".attention.head_count_kv", f.n_head_kv)) f.n_head_kv = f.n_head;
  read_int(file, f.arch + ".expert_count", f.n_expert);
  return f;
}

// ggml's count of dimensions: the trailing 1s do not count.
int ggml_dims(const int64_t *ne, uint32_t n) {
  int d = static_cast<int>(n);
  while (d > 1 && ne[d - 1] == 1) --d;
  return d;
}

bool readable(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }

}  // namespace

bool make_plan(const bp_gguf *file, const quant_mix &mix, bool pure, quantize_plan &plan, std::string &error) {
  plan = {};
  plan.facts = read_facts(file);
  plan.alignment = bp_gguf_alignment(file);
  const size_t n = bp_gguf_tensor_count(file);
  std::vector<planned_tensor> ts(n);
  for (size_t i = 0; i < n; ++i) {
    bp_gguf_tensor_info info{};
    info.struct_size = sizeof info;
    if (bp_gguf_tensor_describe(file, i, &info) != BP_OK) {
      error = bp_last_error();
      return false;
    }
    if (!info.supported) {
      error = std::string("tensor ") + info.name + " is " + info.type_name +
              ", a type bp-gguf quantize cannot read; quantize from an f32, f16 or bf16 file";
      return false;
    }
    if (bp_type_block_size(info.type) > 1) {
      error = std::string("the file is already quantized (tensor ") + info.name + " is " + info.type_name +
              "); quantize from an f32, f16 or bf16 file";
      return false;
    }
    planned_tensor &p = ts[i];
    p.index = i;
    p.t.name = info.name;
    p.t.type = info.type;
    std::copy(info.ne, info.ne + 4, p.t.ne);
    for (uint32_t d = info.n_dims; d < 4; ++d) p.t.ne[d] = 1;
    p.t.n_dims = ggml_dims(p.t.ne, info.n_dims);
    const void *src = nullptr;
    if (bp_gguf_tensor_data(file, i, &src, &p.src_bytes) != BP_OK) {
      error = bp_last_error();
      return false;
    }
    p.src = static_cast<const uint8_t *>(src);
  }
  if (!pure && bp_type_block_size(mix.base) > 1 && plan.facts.n_layer <= 0) {
    error = "the file has no " + plan.facts.arch + ".block_count (general.architecture \"" + plan.facts.arch +
            "\"): the rules of " + mix.name + " need the layer count (or use --pure)";
    return false;
  }
  std::stable_sort(ts.begin(), ts.end(),
                   [](const planned_tensor &a, const planned_tensor &b) { return llama_order(a.t.name, b.t.name); });
  std::vector<rule_tensor> rts;
  rts.reserve(n);
  for (const planned_tensor &p : ts) rts.push_back(p.t);
  std::vector<rule_choice> choices;
  try {
    choices = choose_types(mix, pure, plan.facts, rts);
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    planned_tensor &p = ts[i];
    p.choice = choices[i];
    if (p.choice.type != p.t.type && !readable(p.t.type)) {
      error = "tensor " + p.t.name + " is " + bp_type_name(p.t.type) + ", which cannot be converted to " +
              bp_type_name(p.choice.type);
      return false;
    }
    const int64_t rows = p.t.ne[1] * p.t.ne[2] * p.t.ne[3];
    p.out_bytes = p.choice.type == p.t.type ? p.src_bytes : bp_type_row_size(p.choice.type, p.t.ne[0]) * rows;
    p.out_offset = offset;
    offset += (p.out_bytes + plan.alignment - 1) / plan.alignment * plan.alignment;
    plan.in_bytes += p.src_bytes;
    plan.out_bytes += p.out_bytes;
    if (p.choice.fell_back) ++plan.n_fallback;
  }
  plan.tensors = std::move(ts);
  return true;
}

}  // namespace bp::gguf_tool
