// quantize_header.cpp: the bytes of the output's header (GGUF version 3):
// the input's metadata pairs in their order and kinds, split.* dropped,
// general.quantization_version and general.file_type moved to the end (where
// llama.cpp's gguf_set_val puts a key it sets), then the tensor table.
#include <cstring>
#include <stdexcept>

#include "quantize.hpp"

namespace bp::gguf_tool {

namespace {

class header_bytes {
 public:
  std::vector<uint8_t> bytes;

  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    bytes.insert(bytes.end(), b, b + sizeof v);
  }
  void str(const char *data, uint64_t len) {
    put<uint64_t>(len);
    bytes.insert(bytes.end(), data, data + len);
  }
  void str(const std::string &s) { str(s.data(), s.size()); }
};

void check(bp_status s) {
  if (s != BP_OK) throw std::runtime_error(bp_last_error());
}

// One element of pair |i| of |kind|, in its own width.
void put_value(header_bytes &h, const bp_gguf *file, size_t i, uint64_t e, bp_gguf_kind kind) {
  int64_t v = 0;
  uint64_t u = 0;
  double d = 0;
  const char *s = nullptr;
  uint64_t len = 0;
  switch (kind) {
    case BP_GGUF_U8:
    case BP_GGUF_I8:
    case BP_GGUF_BOOL:
      check(bp_gguf_kv_read_int(file, i, e, &v));
      return h.put<uint8_t>(static_cast<uint8_t>(v));
    case BP_GGUF_U16:
    case BP_GGUF_I16:
      check(bp_gguf_kv_read_int(file, i, e, &v));
      return h.put<uint16_t>(static_cast<uint16_t>(v));
    case BP_GGUF_U32:
    case BP_GGUF_I32:
      check(bp_gguf_kv_read_int(file, i, e, &v));
      return h.put<uint32_t>(static_cast<uint32_t>(v));
    case BP_GGUF_U64:
      check(bp_gguf_kv_read_uint(file, i, e, &u));
      return h.put<uint64_t>(u);
    case BP_GGUF_I64:
      check(bp_gguf_kv_read_int(file, i, e, &v));
      return h.put<int64_t>(v);
    case BP_GGUF_F32:
      check(bp_gguf_kv_read_float(file, i, e, &d));
      return h.put<float>(static_cast<float>(d));
    case BP_GGUF_F64:
      check(bp_gguf_kv_read_float(file, i, e, &d));
      return h.put<double>(d);
    case BP_GGUF_STRING:
      check(bp_gguf_kv_read_string(file, i, e, &s, &len));
      return h.str(s, len);
    default:
      throw std::runtime_error("metadata kind " + std::to_string(kind) + " cannot be copied");
  }
}

bool dropped(const std::string &key) {
  return key == "general.quantization_version" || key == "general.file_type" || key == "split.no" ||
         key == "split.count" || key == "split.tensors.count";
}

}  // namespace

std::vector<uint8_t> quantize_header(const bp_gguf *file, const quant_mix &mix, const quantize_plan &plan) {
  header_bytes h;
  h.bytes.insert(h.bytes.end(), {'G', 'G', 'U', 'F'});
  h.put<uint32_t>(3);
  h.put<int64_t>(static_cast<int64_t>(plan.tensors.size()));
  const size_t n_kv = bp_gguf_kv_count(file);
  int64_t kept = 0;
  for (size_t i = 0; i < n_kv; ++i) kept += dropped(bp_gguf_kv_key(file, i)) ? 0 : 1;
  h.put<int64_t>(kept + 2);
  for (size_t i = 0; i < n_kv; ++i) {
    const std::string key = bp_gguf_kv_key(file, i);
    if (dropped(key)) continue;
    bp_gguf_value_info vi{};
    vi.struct_size = sizeof vi;
    check(bp_gguf_kv_describe(file, i, &vi));
    h.str(key);
    h.put<uint32_t>(vi.kind);
    if (vi.kind == BP_GGUF_ARRAY) {
      h.put<uint32_t>(vi.elem_kind);
      h.put<uint64_t>(vi.count);
      for (uint64_t e = 0; e < vi.count; ++e) put_value(h, file, i, e, vi.elem_kind);
    } else {
      put_value(h, file, i, 0, vi.kind);
    }
  }
  h.str(std::string("general.quantization_version"));
  h.put<uint32_t>(BP_GGUF_U32);
  h.put<uint32_t>(2);
  h.str(std::string("general.file_type"));
  h.put<uint32_t>(BP_GGUF_U32);
  h.put<uint32_t>(mix.file_type);
  for (const planned_tensor &p : plan.tensors) {
    h.str(p.t.name);
    h.put<uint32_t>(static_cast<uint32_t>(p.t.n_dims));
    for (int d = 0; d < p.t.n_dims; ++d) h.put<int64_t>(p.t.ne[d]);
    h.put<uint32_t>(bp_gguf_file_type_of(p.choice.type));
    h.put<uint64_t>(p.out_offset);
  }
  const size_t a = plan.alignment;
  h.bytes.resize((h.bytes.size() + a - 1) / a * a, 0);
  return std::move(h.bytes);
}

}  // namespace bp::gguf_tool
