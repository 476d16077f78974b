// weight_buffer.cpp: the cpu device's buffer type for constant weights
// (bp_device_weight_buffer_type). Host memory like the default type, but
// the matrices of the formats with a repacked layout (repack.hpp) are
// stored repacked: set_tensor packs what it is given, get_tensor unpacks,
// so the host and bp_tensor_get always see the file's bytes. Any byte range
// works: a range that covers part of a group unpacks the group, changes its
// bytes and packs it again. The type does not say it is host memory, so the
// core never reads or writes its bytes itself.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "buffer_slots.hpp"
#include "cpu.hpp"
#include "repack.hpp"

namespace bp::cpu {
namespace {

constexpr size_t kAlignment = 64;
constexpr uint32_t kWeightMagic = 0x57504342u;  // "BCPW"

struct weight_buffer {
  uint32_t magic = kWeightMagic;
  void *data = nullptr;
  size_t size = 0;
};

weight_buffer *weight_buffer_of(void *ctx) {
  auto *b = static_cast<weight_buffer *>(ctx);
  return b && b->magic == kWeightMagic ? b : nullptr;
}

const bp_tensor *root_of(const bp_tensor *t) {
  while (t->view_src) t = t->view_src;
  return t;
}

// The bytes [at, at + size) of buffer |b| hold part of |root|, a tensor in
// the repacked layout. Calls unit(offset in root, bytes, group) for each
// run that is one whole-or-partial group (group = true) or a run of the
// rows past a slice's last group (group = false).
template <typename Unit>
void for_each_unit(const bp_tensor *root, size_t lo, size_t hi, Unit &&unit) {
  const size_t rb = root->nb[1], slice = rb * static_cast<size_t>(root->ne[1]);
  const size_t grouped = rb * static_cast<size_t>(packed_rows(root->ne[1])), gb = rb * kPackRows;
  for (size_t pos = lo; pos < hi;) {
    const size_t s0 = pos / slice * slice, in = pos - s0;
    const bool group = in < grouped;
    const size_t start = group ? s0 + in / gb * gb : pos, end = group ? start + gb : s0 + slice;
    unit(start, std::min(end, hi), pos, group);
    pos = std::min(end, hi);
  }
}

struct weight_transport {
  using buffer = weight_buffer;
  using type_ctx = const char;
  static constexpr const char *default_name = "CPU_weights";
  static constexpr size_t default_alignment = kAlignment;
  static constexpr const char *copy_where = "between cpu weight buffers";

  static weight_buffer *as_buffer(void *buf) { return weight_buffer_of(buf); }
  static bp_status alive(weight_buffer *, bp_error *) { return BP_OK; }
  static plugins::memory_window window(const weight_buffer *b) { return {static_cast<const char *>(b->data), b->size}; }
  static uint8_t *at(weight_buffer *b, size_t offset) { return static_cast<uint8_t *>(b->data) + offset; }
  static void destroy(weight_buffer *b) {
    std::free(b->data);
    delete b;
  }

  // |root| and the offset of the range inside it, when |t| lives in the
  // repacked layout; else NULL.
  static const bp_tensor *repacked_root(weight_buffer *b, const bp_tensor *t, size_t offset, size_t *in_root) {
    if (!t) return nullptr;
    const bp_tensor *root = root_of(t);
    if (!repacked_layout(root)) return nullptr;
    *in_root = offset - static_cast<size_t>(static_cast<const uint8_t *>(root->data) - at(b, 0));
    return root;
  }

  static bp_status write(weight_buffer *b, const bp_tensor *t, size_t at_, const void *data, size_t size, bp_error *) {
    size_t lo = 0;
    const bp_tensor *root = repacked_root(b, t, at_, &lo);
    if (!root) {
      std::memcpy(at(b, at_), data, size);
      return BP_OK;
    }
    qtype q = qtype::q8_0;
    qtype_of(root->type, &q);
    auto *base = static_cast<uint8_t *>(root->data);
    const auto *src = static_cast<const uint8_t *>(data);
    std::vector<uint8_t> plain;
    for_each_unit(root, lo, lo + size, [&](size_t start, size_t end, size_t from, bool group) {
      const size_t gb = root->nb[1] * kPackRows;
      if (!group) {
        std::memcpy(base + from, src + (from - lo), end - from);
      } else if (from == start && end - start == gb) {
        pack_group(q, src + (from - lo), base + start, root->ne[0]);
      } else {
        plain.resize(gb);
        unpack_group(q, base + start, plain.data(), root->ne[0]);
        std::memcpy(plain.data() + (from - start), src + (from - lo), end - from);
        pack_group(q, plain.data(), base + start, root->ne[0]);
      }
    });
    return BP_OK;
  }
  static bp_status read(weight_buffer *b, const bp_tensor *t, size_t at_, void *data, size_t size, bp_error *) {
    size_t lo = 0;
    const bp_tensor *root = repacked_root(b, t, at_, &lo);
    if (!root) {
      std::memcpy(data, at(b, at_), size);
      return BP_OK;
    }
    qtype q = qtype::q8_0;
    qtype_of(root->type, &q);
    const auto *base = static_cast<const uint8_t *>(root->data);
    auto *dst = static_cast<uint8_t *>(data);
    std::vector<uint8_t> plain;
    for_each_unit(root, lo, lo + size, [&](size_t start, size_t end, size_t from, bool group) {
      const size_t gb = root->nb[1] * kPackRows;
      if (!group) {
        std::memcpy(dst + (from - lo), base + from, end - from);
      } else if (from == start && end - start == gb) {
        unpack_group(q, base + start, dst + (from - lo), root->ne[0]);
      } else {
        plain.resize(gb);
        unpack_group(q, base + start, plain.data(), root->ne[0]);
        std::memcpy(dst + (from - lo), plain.data() + (from - start), end - from);
      }
    });
    return BP_OK;
  }
  // A part of a group filled with one byte is not one byte in the packed
  // order: it goes through write.
  static bp_status fill(weight_buffer *b, const bp_tensor *t, size_t at_, uint8_t value, size_t size, bp_error *err) {
    size_t lo = 0;
    if (!repacked_root(b, t, at_, &lo)) {
      std::memset(at(b, at_), value, size);
      return BP_OK;
    }
    const std::vector<uint8_t> bytes(size, value);
    return write(b, t, at_, bytes.data(), size, err);
  }
  static bp_status clear(weight_buffer *b, uint8_t value, bp_error *) {
    if (b->size) std::memset(b->data, value, b->size);
    return BP_OK;
  }
  // No direct copies: the host's generic path reads and writes through
  // read and write, which convert.
  static weight_buffer *source_of(const bp_tensor *) { return nullptr; }
  static bool same_memory(const weight_buffer *, const weight_buffer *) { return false; }
  static bp_status copy(weight_buffer *, size_t, weight_buffer *, size_t, size_t, const bp_tensor *, bp_error *err) {
    return bp_error_set(err, BP_ERR_UNIMPLEMENTED, "cpu weight buffers copy through the host");
  }

  static const char *name(const char *ctx) { return ctx; }
  static bp_status alloc(const char *, size_t size, weight_buffer **out, bp_error *err) {
    if (size > SIZE_MAX - kAlignment)
      return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "cannot allocate %zu bytes", size);
    const size_t rounded = std::max(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
    void *data = std::aligned_alloc(kAlignment, rounded);
    if (!data) return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory allocating %zu bytes", size);
    auto *b = new (std::nothrow) weight_buffer{};
    if (!b) {
      std::free(data);
      return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    b->data = data;
    b->size = size;
    *out = b;
    return BP_OK;
  }
  static size_t alignment(const char *) { return kAlignment; }
  static size_t max_size(const char *) { return SIZE_MAX; }
  static bool is_host(const char *) { return false; }
};

using slots = plugins::buffer_slots<weight_transport>;

}  // namespace

bool repacked_layout(const bp_tensor *t) {
  qtype q = qtype::q8_0;
  if (!qtype_of(t->type, &q) || !repack_format(q) || t->ne[1] < kPackRows) return false;
  const size_t rb = qrow_bytes(q, t->ne[0]);
  return t->ne[0] % 32 == 0 && t->nb[0] == static_cast<size_t>(format_of(q).block_bytes) && t->nb[1] == rb &&
         t->nb[2] == rb * static_cast<size_t>(t->ne[1]) && t->nb[3] == t->nb[2] * static_cast<size_t>(t->ne[2]);
}

bool in_weight_buffer(const bp_tensor *t) { return t->data && weight_buffer_of(t->buffer_ctx) != nullptr; }

// The root decides: a view made without the buffer's ctx still reads it.
bool is_repacked(const bp_tensor *t) {
  const bp_tensor *root = root_of(t);
  return in_weight_buffer(root) && repacked_layout(root);
}

bp_buffer_type_ref weight_buffer_type_ref() {
  static const char name[] = "CPU_weights";
  return bp_buffer_type_ref{&slots::type_table, const_cast<char *>(name)};
}

bool is_weight_buffer_type(bp_buffer_type_ref buft) { return buft.iface == &slots::type_table; }

}  // namespace bp::cpu
