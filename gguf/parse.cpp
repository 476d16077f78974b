// parse.cpp: the GGUF parser (parse.hpp). The layout it reads, in order:
// magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, the n_kv metadata
// pairs (string key, u32 kind, value), the n_tensors tensor infos (string
// name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset), padding to the
// alignment, the data section. Little-endian throughout; a string is a u64
// byte length and that many bytes, no terminator.
#include "gguf/parse.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_set>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the GGUF reader reads little-endian values in place");

namespace bp::gguf {

namespace {

constexpr uint64_t kMaxKeyBytes = 65535;  // the format's limit on a key
constexpr uint64_t kMaxNameBytes = 64;    // ... and on a tensor name
constexpr uint32_t kMaxDims = 4;

const tensor_type kTypes[] = {
    /* 0 */ {"f32", 1, 4},
    /* 1 */ {"f16", 1, 2},
    /* 2 */ {"q4_0", 32, 18},
    /* 3 */ {"q4_1", 32, 20},
    /* 4 */ {nullptr, 0, 0},  // removed from the format
    /* 5 */ {nullptr, 0, 0},
    /* 6 */ {"q5_0", 32, 22},
    /* 7 */ {"q5_1", 32, 24},
    /* 8 */ {"q8_0", 32, 34},
    /* 9 */ {"q8_1", 32, 36},
    /* 10 */ {"q2_k", 256, 84},
    /* 11 */ {"q3_k", 256, 110},
    /* 12 */ {"q4_k", 256, 144},
    /* 13 */ {"q5_k", 256, 176},
    /* 14 */ {"q6_k", 256, 210},
    /* 15 */ {"q8_k", 256, 292},
    /* 16 */ {"iq2_xxs", 256, 66},
    /* 17 */ {"iq2_xs", 256, 74},
    /* 18 */ {"iq3_xxs", 256, 98},
    /* 19 */ {"iq1_s", 256, 50},
    /* 20 */ {"iq4_nl", 32, 18},
    /* 21 */ {"iq3_s", 256, 110},
    /* 22 */ {"iq2_s", 256, 82},
    /* 23 */ {"iq4_xs", 256, 136},
    /* 24 */ {"i8", 1, 1},
    /* 25 */ {"i16", 1, 2},
    /* 26 */ {"i32", 1, 4},
    /* 27 */ {"i64", 1, 8},
    /* 28 */ {"f64", 1, 8},
    /* 29 */ {"iq1_m", 256, 56},
    /* 30 */ {"bf16", 1, 2},
    /* 31 */ {nullptr, 0, 0},  // interleaved q4_0 layouts, no longer in files
    /* 32 */ {nullptr, 0, 0},
    /* 33 */ {nullptr, 0, 0},
    /* 34 */ {"tq1_0", 256, 54},
    /* 35 */ {"tq2_0", 256, 66},
    /* 36 */ {nullptr, 0, 0},  // interleaved iq4_nl layouts, no longer in files
    /* 37 */ {nullptr, 0, 0},
    /* 38 */ {nullptr, 0, 0},
    /* 39 */ {"mxfp4", 32, 17},
};

const char *const kKindNames[KIND_COUNT] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                            "bool", "string", "array", "u64", "i64", "f64"};
const size_t kKindSizes[KIND_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

// Reads forward through the bytes; every read checks the bytes are there.
class reader {
 public:
  reader(const uint8_t *data, size_t size, std::string &error) : data_(data), size_(size), error_(error) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  // printf-style refusal; always returns false.
  bool fail(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    error_ = std::string("gguf: ") + buf;
    return false;
  }

  // |n| bytes of |field| must be there.
  bool need(uint64_t n, const char *field) {
    if (n <= left()) return true;
    return fail("truncated file: %s at byte %" PRIu64 " needs %" PRIu64 " bytes, the file ends at byte %zu", field,
                pos_, n, size_);
  }

  template <typename T>
  bool read(T &out, const char *field) {
    if (!need(sizeof(T), field)) return false;
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool skip(uint64_t n, const char *field) {
    if (!need(n, field)) return false;
    pos_ += n;
    return true;
  }

  // A string: u64 length, then the bytes. |field| names it in messages.
  bool read_string(std::string *out, const char *field, uint64_t *len_out = nullptr) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    if (!read(len, field)) return false;
    if (len > left()) {
      return fail("string length of %s at byte %" PRIu64 " is %" PRIu64 ", past the end of the file (%" PRIu64
                  " bytes left)",
                  field, at, len, left());
    }
    if (out) out->assign(reinterpret_cast<const char *>(data_ + pos_), static_cast<size_t>(len));
    if (len_out) *len_out = len;
    pos_ += len;
    return true;
  }

 private:
  const uint8_t *data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string &error_;
};

// The smallest number of bytes one value of |kind| takes (a string: its length field).
uint64_t min_value_bytes(uint32_t kind) {
  if (kind == KIND_STRING) return 8;
  if (kind == KIND_ARRAY) return 12;
  return kKindSizes[kind];
}

bool read_value(reader &r, kv &v, uint64_t kv_index) {
  char field[96];
  const uint64_t kind_at = r.pos() - 4;
  if (v.kind >= KIND_COUNT) {
    return r.fail("value_type of kv %" PRIu64 " ('%s') at byte %" PRIu64 " is %u, not a kind of the format (0..12)",
                  kv_index, v.key.c_str(), kind_at, v.kind);
  }
  if (v.kind != KIND_ARRAY) {
    v.value_offset = r.pos();
    v.count = 1;
    if (v.kind == KIND_STRING) {
      v.strings.push_back(r.pos());
      std::snprintf(field, sizeof field, "value of '%s'", v.key.c_str());
      return r.read_string(nullptr, field);
    }
    if (v.kind == KIND_BOOL) {
      uint8_t b = 0;
      if (!r.read(b, "bool value")) return false;
      if (b > 1) {
        return r.fail("bool value of '%s' at byte %" PRIu64 " is %u; a bool is 0 or 1", v.key.c_str(), r.pos() - 1, b);
      }
      return true;
    }
    return r.skip(kKindSizes[v.kind], "value");
  }
  const uint64_t elem_at = r.pos();
  if (!r.read(v.elem_kind, "array type")) return false;
  if (v.elem_kind >= KIND_COUNT) {
    return r.fail("array type of '%s' at byte %" PRIu64 " is %u, not a kind of the format (0..12)", v.key.c_str(),
                  elem_at, v.elem_kind);
  }
  if (v.elem_kind == KIND_ARRAY) {
    return r.fail("array type of '%s' at byte %" PRIu64
                  " is array: arrays of arrays are not read (no known writer makes them)",
                  v.key.c_str(), elem_at);
  }
  const uint64_t count_at = r.pos();
  if (!r.read(v.count, "array length")) return false;
  uint64_t min_bytes = 0;
  if (__builtin_mul_overflow(v.count, min_value_bytes(v.elem_kind), &min_bytes) || min_bytes > r.left()) {
    return r.fail("array length of '%s' at byte %" PRIu64 " is %" PRIu64 " %s elements, more than the %" PRIu64
                  " bytes left in the file hold",
                  v.key.c_str(), count_at, v.count, kKindNames[v.elem_kind], r.left());
  }
  v.value_offset = r.pos();
  if (v.elem_kind == KIND_STRING) {
    v.strings.reserve(static_cast<size_t>(v.count));
    std::snprintf(field, sizeof field, "an element of '%s'", v.key.c_str());
    for (uint64_t i = 0; i < v.count; ++i) {
      v.strings.push_back(r.pos());
      if (!r.read_string(nullptr, field)) return false;
    }
    return true;
  }
  if (v.elem_kind == KIND_BOOL) {
    for (uint64_t i = 0; i < v.count; ++i) {
      uint8_t b = 0;
      if (!r.read(b, "bool element")) return false;
      if (b > 1) {
        return r.fail("bool element %" PRIu64 " of '%s' at byte %" PRIu64 " is %u; a bool is 0 or 1", i, v.key.c_str(),
                      r.pos() - 1, b);
      }
    }
    return true;
  }
  return r.skip(min_bytes, "array elements");
}

bool read_alignment(const uint8_t *data, const kv &v, file_info &out, reader &r) {
  if (v.kind != KIND_U32) {
    return r.fail("general.alignment at byte %" PRIu64 " is a %s; the format makes it a u32", v.key_offset,
                  kKindNames[v.kind]);
  }
  uint32_t a = 0;
  std::memcpy(&a, data + v.value_offset, 4);
  if (a == 0 || a % 8 != 0) {
    return r.fail("general.alignment at byte %" PRIu64 " is %u; the format wants a non-zero multiple of 8",
                  v.value_offset, a);
  }
  out.alignment = a;
  return true;
}

bool read_tensor_info(reader &r, tensor_info &t, uint64_t index) {
  t.info_offset = r.pos();
  uint64_t name_len = 0;
  if (!r.read_string(&t.name, "tensor name", &name_len)) return false;
  if (name_len == 0)
    return r.fail("tensor name of tensor %" PRIu64 " at byte %" PRIu64 " is empty", index, t.info_offset);
  if (name_len > kMaxNameBytes) {
    return r.fail("tensor name of tensor %" PRIu64 " at byte %" PRIu64 " is %" PRIu64
                  " bytes; the format allows at most 64",
                  index, t.info_offset, name_len);
  }
  if (!valid_utf8(t.name.data(), t.name.size())) {
    return r.fail("tensor name of tensor %" PRIu64 " at byte %" PRIu64 " is not valid UTF-8", index, t.info_offset);
  }
  const char *name = t.name.c_str();
  const uint64_t dims_at = r.pos();
  if (!r.read(t.n_dims, "n_dims")) return false;
  if (t.n_dims == 0 || t.n_dims > kMaxDims) {
    return r.fail("n_dims of tensor '%s' at byte %" PRIu64 " is %u; Backplane holds 1 to 4 dimensions", name, dims_at,
                  t.n_dims);
  }
  int64_t elements = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    const uint64_t at = r.pos();
    uint64_t n = 0;
    if (!r.read(n, "ne")) return false;
    if (n == 0 || n > static_cast<uint64_t>(INT64_MAX)) {
      return r.fail("ne[%u] of tensor '%s' at byte %" PRIu64 " is %" PRId64 "; every dimension must be positive", d,
                    name, at, static_cast<int64_t>(n));
    }
    t.ne[d] = static_cast<int64_t>(n);
    if (__builtin_mul_overflow(elements, t.ne[d], &elements)) {
      return r.fail("element count of tensor '%s' (ne at byte %" PRIu64 ") overflows int64", name, dims_at + 4);
    }
  }
  const uint64_t type_at = r.pos();
  if (!r.read(t.type, "tensor type")) return false;
  const tensor_type *tt = find_tensor_type(t.type);
  if (tt == nullptr) {
    return r.fail("tensor type of tensor '%s' at byte %" PRIu64 " is %u, not a type id of the format", name, type_at,
                  t.type);
  }
  if (t.ne[0] % tt->block != 0) {
    return r.fail("ne[0] of tensor '%s' at byte %" PRIu64 " is %" PRId64
                  ", not a multiple of the %u-element block of type %s",
                  name, dims_at + 4, t.ne[0], tt->block, tt->name);
  }
  // Bytes: blocks per row times block bytes, times the rows.
  uint64_t rows = static_cast<uint64_t>(elements / t.ne[0]);
  uint64_t row_bytes = static_cast<uint64_t>(t.ne[0] / tt->block) * tt->bytes;
  if (__builtin_mul_overflow(row_bytes, rows, &t.nbytes)) {
    return r.fail("element count of tensor '%s' (ne at byte %" PRIu64 ") gives more bytes than 64 bits count", name,
                  dims_at + 4);
  }
  return r.read(t.offset, "offset");
}

}  // namespace

const char *kind_name(uint32_t kind) { return kind < KIND_COUNT ? kKindNames[kind] : nullptr; }
size_t kind_size(uint32_t kind) { return kind < KIND_COUNT ? kKindSizes[kind] : 0; }

const tensor_type *find_tensor_type(uint32_t id) {
  if (id >= sizeof kTypes / sizeof kTypes[0] || kTypes[id].name == nullptr) return nullptr;
  return &kTypes[id];
}

bool valid_utf8(const char *s, size_t n) {
  const auto *p = reinterpret_cast<const unsigned char *>(s);
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

void string_at(const uint8_t *data, const kv &v, uint64_t which, const char **ptr, uint64_t *len) {
  const uint64_t at = v.strings[static_cast<size_t>(which)];
  std::memcpy(len, data + at, 8);
  *ptr = reinterpret_cast<const char *>(data + at + 8);
}

bool parse(const uint8_t *data, size_t size, file_info &out, std::string &error) {
  out = file_info{};
  reader r(data, size, error);
  uint8_t magic[4] = {};
  if (!r.need(4, "magic")) return false;
  std::memcpy(magic, data, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return r.fail("magic at byte 0 is %02x %02x %02x %02x, not \"GGUF\": this is not a GGUF file", magic[0], magic[1],
                  magic[2], magic[3]);
  }
  r.skip(4, "magic");
  if (!r.read(out.version, "version")) return false;
  if (out.version == 0x02000000u || out.version == 0x03000000u) {
    return r.fail(
        "version at byte 4 reads %u byte-swapped: a big-endian GGUF file; Backplane reads little-endian "
        "files (convert it on a big-endian machine)",
        out.version >> 24);
  }
  if (out.version != 2 && out.version != 3) {
    return r.fail(
        "version at byte 4 is %u; Backplane reads versions 2 and 3 (version 1 files: convert them with a "
        "current writer)",
        out.version);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  if (!r.read(n_tensors, "n_tensors") || !r.read(n_kv, "n_kv")) return false;
  // The smallest pair is a 1-byte key (8 + 1), its kind (4) and a 1-byte value.
  uint64_t need = 0;
  if (__builtin_mul_overflow(n_kv, uint64_t{14}, &need) || need > r.left()) {
    return r.fail("n_kv at byte 16 is %" PRIu64 ", more pairs than the %" PRIu64 " bytes after the header hold", n_kv,
                  r.left());
  }
  // The smallest tensor info: a 1-byte name (8 + 1), n_dims, one dimension, type and offset.
  if (__builtin_mul_overflow(n_tensors, uint64_t{33}, &need) || need > r.left()) {
    return r.fail("n_tensors at byte 8 is %" PRIu64 ", more tensor infos than the %" PRIu64
                  " bytes after the header hold",
                  n_tensors, r.left());
  }

  out.kvs.reserve(static_cast<size_t>(n_kv));
  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    kv v;
    v.key_offset = r.pos();
    uint64_t key_len = 0;
    if (!r.read_string(&v.key, "key", &key_len)) return false;
    if (key_len == 0) return r.fail("key of kv %" PRIu64 " at byte %" PRIu64 " is empty", i, v.key_offset);
    if (key_len > kMaxKeyBytes) {
      return r.fail("key of kv %" PRIu64 " at byte %" PRIu64 " is %" PRIu64 " bytes; the format allows at most 65535",
                    i, v.key_offset, key_len);
    }
    if (!valid_utf8(v.key.data(), v.key.size())) {
      return r.fail("key of kv %" PRIu64 " at byte %" PRIu64 " is not valid UTF-8", i, v.key_offset);
    }
    if (!keys.insert(v.key).second) {
      return r.fail("key '%s' at byte %" PRIu64 " is a duplicate: each key appears once", v.key.c_str(), v.key_offset);
    }
    if (!r.read(v.kind, "value_type")) return false;
    if (!read_value(r, v, i)) return false;
    if (v.key == "general.alignment" && !read_alignment(data, v, out, r)) return false;
    out.kvs.push_back(std::move(v));
  }

  out.tensors.reserve(static_cast<size_t>(n_tensors));
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    tensor_info t;
    if (!read_tensor_info(r, t, i)) return false;
    if (!names.insert(t.name).second) {
      return r.fail("tensor name '%s' at byte %" PRIu64 " is a duplicate: each tensor appears once", t.name.c_str(),
                    t.info_offset);
    }
    out.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end = r.pos(), rem = end % out.alignment;
  out.data_offset = end + (rem ? out.alignment - rem : 0);  // end < 2^63: no overflow
  out.data_size = out.data_offset < size ? size - out.data_offset : 0;

  std::vector<const tensor_info *> by_offset;
  by_offset.reserve(out.tensors.size());
  for (const tensor_info &t : out.tensors) {
    const uint64_t off_at = t.info_offset + 8 + t.name.size() + 4 + 8ull * t.n_dims + 4;
    if (t.offset % out.alignment != 0) {
      return r.fail("offset of tensor '%s' at byte %" PRIu64 " is %" PRIu64
                    ", not a multiple of the alignment %" PRIu64,
                    t.name.c_str(), off_at, t.offset, out.alignment);
    }
    uint64_t t_end = 0;
    if (__builtin_add_overflow(t.offset, t.nbytes, &t_end) || t_end > out.data_size) {
      return r.fail("data range of tensor '%s' (offset at byte %" PRIu64 "): %" PRIu64 " bytes at offset %" PRIu64
                    " run past the %" PRIu64 "-byte data section (truncated file?)",
                    t.name.c_str(), off_at, t.nbytes, t.offset, out.data_size);
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const tensor_info *a, const tensor_info *b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const tensor_info &a = *by_offset[i - 1], &b = *by_offset[i];
    if (a.offset + a.nbytes > b.offset) {
      return r.fail("data range of tensor '%s' (offset %" PRIu64 ", entry at byte %" PRIu64
                    ") overlaps tensor '%s' (offset %" PRIu64 ", %" PRIu64 " bytes)",
                    b.name.c_str(), b.offset, b.info_offset, a.name.c_str(), a.offset, a.nbytes);
    }
  }
  return true;
}

}  // namespace bp::gguf
