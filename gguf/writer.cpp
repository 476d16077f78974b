// writer.cpp: bp_gguf_writer, a GGUF version 3 file from metadata and
// tensors, little-endian, every tensor at a multiple of the alignment and
// the gaps filled with zero bytes.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>

#include "gguf/internal.hpp"

using bp::core::api_guard;
using bp::core::set_errorf;

namespace {

struct pending_tensor {
  std::string name;
  uint32_t file_type = 0;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nbytes = 0;
  const bp_tensor *tensor = nullptr;  // read with bp_tensor_get, or
  const void *data = nullptr;         // host bytes
};

}  // namespace

struct bp_gguf_writer {
  uint32_t tag = bp::core::TAG_GGUF_WRITER;
  uint32_t alignment = 32;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs;  // key, encoded kind + value
  std::set<std::string> keys, names;
  std::vector<pending_tensor> tensors;
  bp::core::live_mark live;  // last: see live_mark
};

namespace {

void put_raw(std::vector<uint8_t> &out, const void *p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <typename T>
void put(std::vector<uint8_t> &out, T v) {
  put_raw(out, &v, sizeof(T));
}

void put_string(std::vector<uint8_t> &out, const char *s, uint64_t n) {
  put<uint64_t>(out, n);
  put_raw(out, s, static_cast<size_t>(n));
}

bool writer_ok(const bp_gguf_writer *w, const char *fn) {
  return bp::gguf::handle_check(w, bp::core::TAG_GGUF_WRITER, fn, "writer");
}

bp_status check_key(const bp_gguf_writer *w, const char *key, const char *fn) {
  if (!writer_ok(w, fn)) return BP_ERR_INVALID_ARGUMENT;
  if (key == nullptr || *key == 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: the key is NULL or empty", fn);
  const size_t n = std::strlen(key);
  if (n > 65535) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: the key is %zu bytes; the format allows 65535", fn, n);
  if (!bp::gguf::valid_utf8(key, n)) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: the key is not valid UTF-8", fn);
  if (std::strcmp(key, "general.alignment") == 0) {
    // Its kind and value decide where every tensor goes: one setter owns it.
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: set general.alignment with bp_gguf_writer_set_alignment", fn);
  }
  if (w->keys.count(key)) return set_errorf(BP_ERR_ALREADY_EXISTS, "%s: key '%s' was already added", fn, key);
  return BP_OK;
}

bool fixed_kind(uint32_t kind) { return kind < bp::gguf::KIND_COUNT && bp::gguf::kind_size(kind) > 0; }

void add_kv(bp_gguf_writer *w, const char *key, std::vector<uint8_t> value) {
  w->keys.insert(key);
  w->kvs.emplace_back(key, std::move(value));
}

bp_status check_name(bp_gguf_writer *w, const char *name, const char *fn) {
  if (name == nullptr || *name == 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: the tensor has no name", fn);
  const size_t n = std::strlen(name);
  if (n >= BP_MAX_NAME) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor name '%s' is %zu bytes; at most %d", fn, name, n,
                      BP_MAX_NAME - 1);
  }
  if (!bp::gguf::valid_utf8(name, n)) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor name '%s' is not valid UTF-8", fn, name);
  }
  if (w->names.count(name)) return set_errorf(BP_ERR_ALREADY_EXISTS, "%s: tensor '%s' was already added", fn, name);
  return BP_OK;
}

bool write_all(std::FILE *f, const void *p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f) == n; }

bool write_zeros(std::FILE *f, uint64_t n) {
  static const uint8_t zeros[256] = {};
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof zeros));
    if (!write_all(f, zeros, k)) return false;
    n -= k;
  }
  return true;
}

}  // namespace

extern "C" {

BP_API bp_status bp_gguf_writer_new(bp_gguf_writer **out_writer) {
  return api_guard([&]() -> bp_status {
    if (out_writer == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_writer_new: out_writer is NULL");
    *out_writer = new bp_gguf_writer;
    return BP_OK;
  });
}

BP_API void bp_gguf_writer_free(bp_gguf_writer *writer) {
  BP_API_SCOPE();
  if (writer == nullptr) return;
  // Asks the set of live handles before reading |writer| (a second free).
  if (!bp::core::free_check(writer, bp::core::TAG_GGUF_WRITER, "bp_gguf_writer_free", "writer")) return;
  bp::core::retire_handle(writer);
}

BP_API bp_status bp_gguf_writer_set_alignment(bp_gguf_writer *writer, uint32_t alignment) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_set_alignment";
    if (!writer_ok(writer, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (alignment == 0 || alignment % 8 != 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %u is not a non-zero multiple of 8", fn, alignment);
    }
    writer->alignment = alignment;
    std::vector<uint8_t> v;
    put<uint32_t>(v, bp::gguf::KIND_U32);
    put<uint32_t>(v, alignment);
    for (auto &kv : writer->kvs) {
      if (kv.first == "general.alignment") {
        kv.second = std::move(v);
        return BP_OK;
      }
    }
    add_kv(writer, "general.alignment", std::move(v));
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_writer_add_value(bp_gguf_writer *writer, const char *key, bp_gguf_kind kind,
                                          const void *value) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_add_value";
    if (bp_status st = check_key(writer, key, fn); st != BP_OK) return st;
    if (!fixed_kind(kind)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: kind %d is not a single-value kind (strings: _add_string, "
                        "arrays: _add_array)",
                        fn, (int)kind);
    }
    if (value == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: value is NULL", fn);
    if (kind == BP_GGUF_BOOL && *static_cast<const uint8_t *>(value) > 1) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: a bool is 0 or 1", fn);
    }
    std::vector<uint8_t> v;
    put<uint32_t>(v, kind);
    const auto *p = static_cast<const uint8_t *>(value);
    v.insert(v.end(), p, p + bp::gguf::kind_size(kind));
    add_kv(writer, key, std::move(v));
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_writer_add_string(bp_gguf_writer *writer, const char *key, const char *data, uint64_t len) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_add_string";
    if (bp_status st = check_key(writer, key, fn); st != BP_OK) return st;
    if (data == nullptr && len > 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    std::vector<uint8_t> v;
    put<uint32_t>(v, bp::gguf::KIND_STRING);
    put_string(v, data, len);
    add_kv(writer, key, std::move(v));
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_writer_add_array(bp_gguf_writer *writer, const char *key, bp_gguf_kind elem_kind,
                                          const void *values, uint64_t count) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_add_array";
    if (bp_status st = check_key(writer, key, fn); st != BP_OK) return st;
    if (elem_kind != BP_GGUF_STRING && !fixed_kind(elem_kind)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: element kind %d: arrays hold single values or strings", fn,
                        (int)elem_kind);
    }
    if (values == nullptr && count > 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: values is NULL", fn);
    std::vector<uint8_t> v;
    put<uint32_t>(v, bp::gguf::KIND_ARRAY);
    put<uint32_t>(v, elem_kind);
    put<uint64_t>(v, count);
    if (elem_kind == BP_GGUF_STRING) {
      const auto *strs = static_cast<const char *const *>(values);
      for (uint64_t i = 0; i < count; ++i) {
        if (strs[i] == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: string %" PRIu64 " is NULL", fn, i);
        put_string(v, strs[i], std::strlen(strs[i]));
      }
    } else {
      const size_t es = bp::gguf::kind_size(elem_kind);
      uint64_t bytes = 0;
      if (__builtin_mul_overflow(count, es, &bytes) || bytes > SIZE_MAX / 2) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %" PRIu64 " elements are too many", fn, count);
      }
      const auto *p = static_cast<const uint8_t *>(values);
      if (elem_kind == BP_GGUF_BOOL) {
        for (uint64_t i = 0; i < count; ++i) {
          if (p[i] > 1) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: element %" PRIu64 ": a bool is 0 or 1", fn, i);
        }
      }
      v.insert(v.end(), p, p + bytes);
    }
    add_kv(writer, key, std::move(v));
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_writer_add_tensor(bp_gguf_writer *writer, const bp_tensor *t) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_add_tensor";
    if (!writer_ok(writer, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (t == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    if (bp_status st = check_name(writer, t->name, fn); st != BP_OK) return st;
    if (t->buffer == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has no memory: allocate and fill it first", fn,
                        t->name);
    }
    if (!bp_tensor_is_contiguous(t)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is not contiguous: add bp_cont of it", fn, t->name);
    }
    const uint32_t ft = bp_gguf_file_type_of(t->type);
    if (ft == UINT32_MAX) {
      return set_errorf(BP_ERR_UNIMPLEMENTED, "%s: tensor '%s' has type %d, which has no GGUF id", fn, t->name,
                        (int)t->type);
    }
    pending_tensor p;
    p.name = t->name;
    p.file_type = ft;
    p.n_dims = 1;
    for (int d = 0; d < BP_MAX_DIMS; ++d) {
      p.ne[d] = t->ne[d];
      if (t->ne[d] != 1) p.n_dims = static_cast<uint32_t>(d + 1);
    }
    p.nbytes = bp_tensor_nbytes(t);
    p.tensor = t;
    writer->names.insert(p.name);
    writer->tensors.push_back(std::move(p));
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_writer_add_tensor_data(bp_gguf_writer *writer, const char *name, uint32_t file_type,
                                                int n_dims, const int64_t *ne, const void *data, uint64_t size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_add_tensor_data";
    if (!writer_ok(writer, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (bp_status st = check_name(writer, name, fn); st != BP_OK) return st;
    const bp::gguf::tensor_type *tt = bp::gguf::find_tensor_type(file_type);
    if (tt == nullptr)
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %u is not a type id of the format", fn, file_type);
    if (n_dims < 1 || n_dims > BP_MAX_DIMS || ne == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: n_dims must be 1..4 with ne given", fn);
    }
    pending_tensor p;
    p.name = name;
    p.file_type = file_type;
    p.n_dims = static_cast<uint32_t>(n_dims);
    uint64_t elements = 1;
    for (int d = 0; d < n_dims; ++d) {
      if (ne[d] <= 0)
        return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: ne[%d] = %" PRId64 " is not positive", fn, d, ne[d]);
      p.ne[d] = ne[d];
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(ne[d]), &elements) || elements > INT64_MAX) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: the element count overflows int64", fn);
      }
    }
    if (ne[0] % tt->block != 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: ne[0] = %" PRId64 " is not a multiple of the %u-element block of %s", fn, ne[0], tt->block,
                        tt->name);
    }
    const uint64_t nbytes = elements / tt->block * tt->bytes;  // elements <= INT64_MAX, bytes <= 292: may overflow
    if (elements / tt->block > UINT64_MAX / tt->bytes || size != nbytes) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: tensor '%s' of type %s needs %" PRIu64 " bytes; %" PRIu64 " given", fn, name, tt->name,
                        nbytes, size);
    }
    if (data == nullptr && size > 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    p.nbytes = nbytes;
    p.data = data;
    writer->names.insert(p.name);
    writer->tensors.push_back(std::move(p));
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_writer_write(const bp_gguf_writer *writer, const char *path) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_writer_write";
    if (!writer_ok(writer, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (path == nullptr || *path == 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: path is NULL or empty", fn);
    const uint64_t align = writer->alignment;
    // Header, metadata and tensor infos in memory; then the data.
    std::vector<uint8_t> head;
    put_raw(head, "GGUF", 4);
    put<uint32_t>(head, 3);
    put<uint64_t>(head, writer->tensors.size());
    put<uint64_t>(head, writer->kvs.size());
    for (const auto &kv : writer->kvs) {
      put_string(head, kv.first.data(), kv.first.size());
      put_raw(head, kv.second.data(), kv.second.size());
    }
    std::vector<uint64_t> offsets;
    uint64_t at = 0;
    for (const pending_tensor &t : writer->tensors) {
      put_string(head, t.name.data(), t.name.size());
      put<uint32_t>(head, t.n_dims);
      for (uint32_t d = 0; d < t.n_dims; ++d) put<uint64_t>(head, static_cast<uint64_t>(t.ne[d]));
      put<uint32_t>(head, t.file_type);
      at = (at + align - 1) / align * align;
      put<uint64_t>(head, at);
      offsets.push_back(at);
      at += t.nbytes;
    }
    const uint64_t pad = (align - head.size() % align) % align;

    const std::string tmp = std::string(path) + ".tmp." + std::to_string(getpid());
    std::FILE *f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: cannot create %s: %s", fn, tmp.c_str(), std::strerror(errno));
    }
    bool ok = write_all(f, head.data(), head.size()) && write_zeros(f, pad);
    bp_status st = BP_OK;
    std::vector<uint8_t> bounce;
    uint64_t pos = 0;
    for (size_t i = 0; ok && st == BP_OK && i < writer->tensors.size(); ++i) {
      const pending_tensor &t = writer->tensors[i];
      ok = write_zeros(f, offsets[i] - pos);
      if (t.data != nullptr) {
        ok = ok && write_all(f, t.data, static_cast<size_t>(t.nbytes));
      } else {
        const size_t chunk = size_t{16} << 20;
        bounce.resize(static_cast<size_t>(std::min<uint64_t>(chunk, t.nbytes)));
        for (uint64_t done = 0; ok && done < t.nbytes;) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, t.nbytes - done));
          st = bp_tensor_get(t.tensor, bounce.data(), static_cast<size_t>(done), n);
          if (st != BP_OK) break;
          ok = write_all(f, bounce.data(), n);
          done += n;
        }
      }
      pos = offsets[i] + t.nbytes;
    }
    const int err = errno;
    if (std::fclose(f) != 0) ok = false;
    if (!ok || st != BP_OK) {
      std::remove(tmp.c_str());
      if (st != BP_OK) return st;
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: writing %s failed: %s", fn, tmp.c_str(), std::strerror(err));
    }
    if (std::rename(tmp.c_str(), path) != 0) {
      const int e = errno;
      std::remove(tmp.c_str());
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: renaming %s to %s failed: %s", fn, tmp.c_str(), path,
                        std::strerror(e));
    }
    return BP_OK;
  });
}

}  // extern "C"
