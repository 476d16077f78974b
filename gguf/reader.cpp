// reader.cpp: opening a GGUF file (mapped) or bytes in memory, and reading
// its metadata and tensor infos through gguf.h.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstring>

#include "core/enum_value.hpp"
#include "gguf/internal.hpp"

using bp::core::api_guard;
using bp::core::set_errorf;
using bp::gguf::kv;
using bp::gguf::mapping;

namespace bp::gguf {

mapping::~mapping() {
  if (map_addr != nullptr) munmap(map_addr, size);
  if (fd >= 0) close(fd);
}

}  // namespace bp::gguf

namespace {

bool file_ok(const bp_gguf *f, const char *fn) {
  return bp::gguf::handle_check(f, bp::core::TAG_GGUF_FILE, fn, "file");
}

// Parses the mapping and indexes keys and names; takes |map|.
bp_status finish_open(std::shared_ptr<mapping> map, bp_gguf **out) {
  auto f = std::make_unique<bp_gguf>();
  std::string error;
  if (!bp::gguf::parse(map->data, map->size, f->info, error)) {
    if (!map->path.empty()) error += " (file " + map->path + ")";
    return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, error);
  }
  for (size_t i = 0; i < f->info.kvs.size(); ++i) f->key_index.emplace(f->info.kvs[i].key, i);
  for (size_t i = 0; i < f->info.tensors.size(); ++i) f->tensor_index.emplace(f->info.tensors[i].name, i);
  f->map = std::move(map);
  *out = f.release();
  return BP_OK;
}

// The pair |i| and its element |elem|, or an error naming what is wrong.
const kv *element(const bp_gguf *f, size_t i, uint64_t elem, const char *fn) {
  if (!file_ok(f, fn)) return nullptr;
  if (i >= f->info.kvs.size()) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: pair %zu is past the %zu pairs of the file", fn, i, f->info.kvs.size());
    return nullptr;
  }
  const kv &v = f->info.kvs[i];
  if (elem >= v.count) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: element %" PRIu64 " is past the %" PRIu64 " elements of '%s'", fn, elem,
               v.count, v.key.c_str());
    return nullptr;
  }
  return &v;
}

uint32_t elem_kind_of(const kv &v) { return v.kind == bp::gguf::KIND_ARRAY ? v.elem_kind : v.kind; }

// Reads element |elem| of a numeric pair as the widest of its family.
template <typename T>
T load(const bp_gguf *f, const kv &v, uint64_t elem) {
  T x;
  std::memcpy(&x, f->map->data + v.value_offset + elem * sizeof(T), sizeof(T));
  return x;
}

// Integer element as a signed or unsigned 64-bit value; false for a non-integer kind.
bool integer(const bp_gguf *f, const kv &v, uint64_t elem, bool *negative, uint64_t *magnitude_or_value,
             int64_t *signed_value) {
  int64_t s = 0;
  uint64_t u = 0;
  bool is_signed = true;
  switch (elem_kind_of(v)) {
    case bp::gguf::KIND_U8:
      u = load<uint8_t>(f, v, elem), is_signed = false;
      break;
    case bp::gguf::KIND_BOOL:
      u = load<uint8_t>(f, v, elem), is_signed = false;
      break;
    case bp::gguf::KIND_U16:
      u = load<uint16_t>(f, v, elem), is_signed = false;
      break;
    case bp::gguf::KIND_U32:
      u = load<uint32_t>(f, v, elem), is_signed = false;
      break;
    case bp::gguf::KIND_U64:
      u = load<uint64_t>(f, v, elem), is_signed = false;
      break;
    case bp::gguf::KIND_I8:
      s = load<int8_t>(f, v, elem);
      break;
    case bp::gguf::KIND_I16:
      s = load<int16_t>(f, v, elem);
      break;
    case bp::gguf::KIND_I32:
      s = load<int32_t>(f, v, elem);
      break;
    case bp::gguf::KIND_I64:
      s = load<int64_t>(f, v, elem);
      break;
    default:
      return false;
  }
  if (is_signed) {
    *negative = s < 0;
    *signed_value = s;
    *magnitude_or_value = static_cast<uint64_t>(s);
  } else {
    *negative = false;
    *magnitude_or_value = u;
    *signed_value = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  }
  return true;
}

bp_status wrong_kind(const kv &v, const char *fn, const char *want) {
  return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: '%s' holds %s%s, not %s", fn, v.key.c_str(),
                    v.kind == bp::gguf::KIND_ARRAY ? "an array of " : "a ", bp::gguf::kind_name(elem_kind_of(v)), want);
}

}  // namespace

extern "C" {

BP_API const char *bp_gguf_kind_name(bp_gguf_kind kind) {
  const int raw = bp::core::enum_value(kind);  // callers may pass any number
  const char *n = raw < 0 ? nullptr : bp::gguf::kind_name(static_cast<uint32_t>(raw));
  return n ? n : "?";
}

BP_API bp_status bp_gguf_open(const char *path, bp_gguf **out_file) {
  return api_guard([&]() -> bp_status {
    if (out_file == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_open: out_file is NULL");
    *out_file = nullptr;
    if (path == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_open: path is NULL");
    auto map = std::make_shared<mapping>();
    map->path = path;
    map->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (map->fd < 0) {
      const int e = errno;
      return set_errorf(e == ENOENT ? BP_ERR_NOT_FOUND : BP_ERR_INVALID_ARGUMENT, "bp_gguf_open: cannot open %s: %s",
                        path, std::strerror(e));
    }
    struct stat st {};
    if (fstat(map->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_open: %s is not a regular file", path);
    }
    if (static_cast<uint64_t>(st.st_size) > SIZE_MAX) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_open: %s is larger than this process can map", path);
    }
    map->size = static_cast<size_t>(st.st_size);
    if (map->size > 0) {
      // Private and writable: a host buffer wrapping these pages may be
      // written (its pages are then copied); the file itself never changes.
      void *addr = mmap(nullptr, map->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, map->fd, 0);
      if (addr == MAP_FAILED) {
        const int e = errno;
        return set_errorf(e == ENOMEM ? BP_ERR_OUT_OF_HOST_MEMORY : BP_ERR_INVALID_ARGUMENT,
                          "bp_gguf_open: cannot map %s (%zu bytes): %s", path, map->size, std::strerror(e));
      }
      map->map_addr = addr;
      map->data = static_cast<const uint8_t *>(addr);
    } else {
      static const uint8_t empty = 0;
      map->data = &empty;
    }
    return finish_open(std::move(map), out_file);
  });
}

BP_API bp_status bp_gguf_open_memory(const void *data, size_t size, bp_gguf **out_file) {
  return api_guard([&]() -> bp_status {
    if (out_file == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_open_memory: out_file is NULL");
    *out_file = nullptr;
    if (data == nullptr && size > 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_open_memory: data is NULL for %zu bytes", size);
    }
    auto map = std::make_shared<mapping>();
    static const uint8_t empty = 0;
    map->data = data ? static_cast<const uint8_t *>(data) : &empty;
    map->size = size;
    return finish_open(std::move(map), out_file);
  });
}

BP_API void bp_gguf_close(bp_gguf *file) {
  BP_API_SCOPE();
  if (file == nullptr) return;
  // Asks the set of live handles before reading |file|: a second close is
  // refused without touching the freed storage.
  if (!bp::core::free_check(file, bp::core::TAG_GGUF_FILE, "bp_gguf_close", "file")) return;
  bp::core::retire_handle(file);
}

BP_API uint32_t bp_gguf_version(const bp_gguf *file) {
  BP_API_SCOPE();
  return file_ok(file, "bp_gguf_version") ? file->info.version : 0;
}

BP_API uint64_t bp_gguf_alignment(const bp_gguf *file) {
  BP_API_SCOPE();
  return file_ok(file, "bp_gguf_alignment") ? file->info.alignment : 0;
}

BP_API uint64_t bp_gguf_data_offset(const bp_gguf *file) {
  BP_API_SCOPE();
  return file_ok(file, "bp_gguf_data_offset") ? file->info.data_offset : 0;
}

BP_API uint64_t bp_gguf_file_size(const bp_gguf *file) {
  BP_API_SCOPE();
  return file_ok(file, "bp_gguf_file_size") ? file->map->size : 0;
}

BP_API size_t bp_gguf_kv_count(const bp_gguf *file) {
  BP_API_SCOPE();
  return file_ok(file, "bp_gguf_kv_count") ? file->info.kvs.size() : 0;
}

BP_API const char *bp_gguf_kv_key(const bp_gguf *file, size_t i) {
  BP_API_SCOPE();
  if (!file_ok(file, "bp_gguf_kv_key")) return nullptr;
  if (i >= file->info.kvs.size()) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_kv_key: pair %zu is past the %zu pairs of the file", i,
               file->info.kvs.size());
    return nullptr;
  }
  return file->info.kvs[i].key.c_str();
}

BP_API bp_status bp_gguf_find_key(const bp_gguf *file, const char *key, size_t *out_index) {
  return api_guard([&]() -> bp_status {
    if (!file_ok(file, "bp_gguf_find_key")) return BP_ERR_INVALID_ARGUMENT;
    if (key == nullptr || out_index == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_find_key: key and out_index must not be NULL");
    }
    auto it = file->key_index.find(key);
    if (it == file->key_index.end()) return set_errorf(BP_ERR_NOT_FOUND, "bp_gguf_find_key: no key '%s'", key);
    *out_index = it->second;
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_kv_describe(const bp_gguf *file, size_t i, bp_gguf_value_info *out) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_kv_describe";
    if (out == nullptr || out->struct_size < sizeof(bp_gguf_value_info)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL or its struct_size is not sizeof(bp_gguf_value_info)",
                        fn);
    }
    if (!file_ok(file, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (i >= file->info.kvs.size()) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: pair %zu is past the %zu pairs of the file", fn, i,
                        file->info.kvs.size());
    }
    const kv *v = &file->info.kvs[i];
    out->kind = static_cast<bp_gguf_kind>(v->kind);
    out->elem_kind = static_cast<bp_gguf_kind>(elem_kind_of(*v));
    out->count = v->count;
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_kv_read_int(const bp_gguf *file, size_t i, uint64_t elem, int64_t *out) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_kv_read_int";
    const kv *v = element(file, i, elem, fn);
    if (v == nullptr) return BP_ERR_INVALID_ARGUMENT;
    if (out == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    bool neg = false;
    uint64_t u = 0;
    int64_t s = 0;
    if (!integer(file, *v, elem, &neg, &u, &s)) return wrong_kind(*v, fn, "an integer");
    if (!neg && u > static_cast<uint64_t>(INT64_MAX)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: '%s' is %" PRIu64 ", above INT64_MAX: read it with bp_gguf_kv_read_uint", fn,
                        v->key.c_str(), u);
    }
    *out = s;
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_kv_read_uint(const bp_gguf *file, size_t i, uint64_t elem, uint64_t *out) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_kv_read_uint";
    const kv *v = element(file, i, elem, fn);
    if (v == nullptr) return BP_ERR_INVALID_ARGUMENT;
    if (out == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    bool neg = false;
    uint64_t u = 0;
    int64_t s = 0;
    if (!integer(file, *v, elem, &neg, &u, &s)) return wrong_kind(*v, fn, "an integer");
    if (neg) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: '%s' is %" PRId64 ", negative: read it with bp_gguf_kv_read_int", fn,
                        v->key.c_str(), s);
    }
    *out = u;
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_kv_read_float(const bp_gguf *file, size_t i, uint64_t elem, double *out) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_kv_read_float";
    const kv *v = element(file, i, elem, fn);
    if (v == nullptr) return BP_ERR_INVALID_ARGUMENT;
    if (out == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    const uint32_t k = elem_kind_of(*v);
    if (k == bp::gguf::KIND_F32) {
      *out = load<float>(file, *v, elem);
      return BP_OK;
    }
    if (k == bp::gguf::KIND_F64) {
      *out = load<double>(file, *v, elem);
      return BP_OK;
    }
    bool neg = false;
    uint64_t u = 0;
    int64_t s = 0;
    if (!integer(file, *v, elem, &neg, &u, &s)) return wrong_kind(*v, fn, "a number");
    *out = neg ? static_cast<double>(s) : static_cast<double>(u);
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_kv_read_string(const bp_gguf *file, size_t i, uint64_t elem, const char **out_data,
                                       uint64_t *out_len) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_kv_read_string";
    const kv *v = element(file, i, elem, fn);
    if (v == nullptr) return BP_ERR_INVALID_ARGUMENT;
    if (out_data == nullptr || out_len == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_data and out_len must not be NULL", fn);
    }
    if (elem_kind_of(*v) != bp::gguf::KIND_STRING) return wrong_kind(*v, fn, "a string");
    bp::gguf::string_at(file->map->data, *v, elem, out_data, out_len);
    return BP_OK;
  });
}

BP_API size_t bp_gguf_tensor_count(const bp_gguf *file) {
  BP_API_SCOPE();
  return file_ok(file, "bp_gguf_tensor_count") ? file->info.tensors.size() : 0;
}

BP_API bp_status bp_gguf_find_tensor(const bp_gguf *file, const char *name, size_t *out_index) {
  return api_guard([&]() -> bp_status {
    if (!file_ok(file, "bp_gguf_find_tensor")) return BP_ERR_INVALID_ARGUMENT;
    if (name == nullptr || out_index == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_find_tensor: name and out_index must not be NULL");
    }
    auto it = file->tensor_index.find(name);
    if (it == file->tensor_index.end()) {
      return set_errorf(BP_ERR_NOT_FOUND, "bp_gguf_find_tensor: no tensor '%s' in the file", name);
    }
    *out_index = it->second;
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_tensor_describe(const bp_gguf *file, size_t i, bp_gguf_tensor_info *out) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_tensor_describe";
    if (!file_ok(file, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (out == nullptr || out->struct_size < sizeof(bp_gguf_tensor_info)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: out is NULL or its struct_size is not sizeof(bp_gguf_tensor_info)", fn);
    }
    if (i >= file->info.tensors.size()) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor %zu is past the %zu tensors of the file", fn, i,
                        file->info.tensors.size());
    }
    const bp::gguf::tensor_info &t = file->info.tensors[i];
    out->name = t.name.c_str();
    out->n_dims = t.n_dims;
    for (int d = 0; d < BP_MAX_DIMS; ++d) out->ne[d] = t.ne[d];
    out->file_type = t.type;
    out->type_name = bp::gguf::find_tensor_type(t.type)->name;
    out->type = BP_TYPE_F32;
    out->supported = bp::gguf::backplane_type_of(t.type, &out->type);
    out->offset = t.offset;
    out->file_offset = file->info.data_offset + t.offset;
    out->nbytes = t.nbytes;
    return BP_OK;
  });
}

BP_API bp_status bp_gguf_tensor_data(const bp_gguf *file, size_t i, const void **out_data, uint64_t *out_size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_tensor_data";
    if (!file_ok(file, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (out_data == nullptr || out_size == nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_data and out_size must not be NULL", fn);
    }
    if (i >= file->info.tensors.size()) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor %zu is past the %zu tensors of the file", fn, i,
                        file->info.tensors.size());
    }
    const bp::gguf::tensor_info &t = file->info.tensors[i];
    *out_data = file->map->data + file->info.data_offset + t.offset;
    *out_size = t.nbytes;
    return BP_OK;
  });
}

}  // extern "C"
