// get.cpp: bp-gguf get: one tensor of the file as little-endian f32, read
// straight from the mapping (no device). Plain number types are converted
// element by element; block-quantized types Backplane holds go through
// bp_dequantize.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf_tool.hpp"

namespace bp::gguf_tool {

namespace {

template <typename T>
T at(const uint8_t *p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// Converts |n| elements of file type |type| at |p| into |out|; false when
// the type is not one this tool converts.
bool to_f32(uint32_t type, const uint8_t *p, uint64_t n, float *out) {
  switch (type) {
    case 0:
      std::memcpy(out, p, n * 4);
      return true;  // f32
    case 1:         // f16
      for (uint64_t i = 0; i < n; ++i) out[i] = bp_fp16_to_fp32(at<uint16_t>(p, i));
      return true;
    case 30:  // bf16: the high half of an f32
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t bits = static_cast<uint32_t>(at<uint16_t>(p, i)) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
      return true;
    case 24:
      for (uint64_t i = 0; i < n; ++i) out[i] = at<int8_t>(p, i);
      return true;
    case 25:
      for (uint64_t i = 0; i < n; ++i) out[i] = at<int16_t>(p, i);
      return true;
    case 26:
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(at<int32_t>(p, i));
      return true;
    case 27:
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(at<int64_t>(p, i));
      return true;
    case 28:
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(at<double>(p, i));
      return true;
    default:
      return false;
  }
}

}  // namespace

int get(const std::string &path, const std::string &tensor, const std::string &out_path) {
  bp_gguf *f = open_or_report(path);
  if (f == nullptr) return 1;
  size_t i = 0;
  if (bp_gguf_find_tensor(f, tensor.c_str(), &i) != BP_OK) {
    std::fprintf(stderr, "bp-gguf: %s (bp-gguf show %s lists them)\n", bp_last_error(), path.c_str());
    bp_gguf_close(f);
    return 1;
  }
  bp_gguf_tensor_info t{};
  t.struct_size = sizeof t;
  bp_gguf_tensor_describe(f, i, &t);
  const void *data = nullptr;
  uint64_t size = 0;
  bp_gguf_tensor_data(f, i, &data, &size);
  uint64_t n = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) n *= static_cast<uint64_t>(t.ne[d]);
  std::vector<float> values;
  try {
    values.resize(n);
  } catch (const std::exception &) {
    std::fprintf(stderr, "bp-gguf: tensor '%s' has %" PRIu64 " elements, more than this machine can hold as f32\n",
                 t.name, n);
    bp_gguf_close(f);
    return 1;
  }
  if (t.supported && bp_type_is_quantized(t.type)) {
    if (bp_dequantize(t.type, data, values.data(), static_cast<int64_t>(n)) != BP_OK) {
      bp_gguf_close(f);
      return fail(std::string("dequantizing '") + t.name + "'");
    }
  } else if (!to_f32(t.file_type, static_cast<const uint8_t *>(data), n, values.data())) {
    std::fprintf(stderr, "bp-gguf: tensor '%s' has type %s, which bp-gguf cannot convert to f32\n", t.name,
                 t.type_name);
    bp_gguf_close(f);
    return 1;
  }
  bp_gguf_close(f);
  std::FILE *out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) {
    std::fprintf(stderr, "bp-gguf: cannot create %s: %s\n", out_path.c_str(), std::strerror(errno));
    return 1;
  }
  const bool ok = std::fwrite(values.data(), sizeof(float), values.size(), out) == values.size();
  if (std::fclose(out) != 0 || !ok) {
    std::fprintf(stderr, "bp-gguf: writing %s failed\n", out_path.c_str());
    return 1;
  }
  std::printf("%s: %" PRIu64 " f32 values (%s, shape", out_path.c_str(), n, t.type_name);
  for (uint32_t d = 0; d < t.n_dims; ++d) std::printf(" %" PRId64, t.ne[d]);
  std::printf(")\n");
  return 0;
}

int fail(const std::string &what) {
  std::fprintf(stderr, "bp-gguf: %s: %s\n", what.c_str(), bp_last_error());
  return 1;
}

bp_gguf *open_or_report(const std::string &path) {
  bp_gguf *f = nullptr;
  if (bp_gguf_open(path.c_str(), &f) != BP_OK) {
    std::fprintf(stderr, "bp-gguf: %s\n", bp_last_error());
    return nullptr;
  }
  return f;
}

}  // namespace bp::gguf_tool
