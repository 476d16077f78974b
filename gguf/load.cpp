// load.cpp: bp_gguf_load, the file's tensors made in a context and given
// memory on a device.
//
// Two paths. Mapped: where the device computes on host memory and wraps
// caller memory (cpu), the tensors are placed in buffers that wrap the
// file's own mapped pages, so nothing is copied and the kernel pages the
// weights in as they are first read. Copied: otherwise the tensors are
// placed in buffers of the device's type and their bytes streamed in
// through one bounce buffer of bounded size (pread from the file), so a
// file larger than free host memory still loads.
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstring>

#include "core/log.hpp"
#include "gguf/internal.hpp"

using bp::core::set_errorf;

namespace {

// Whether |ctx| already has a tensor called |name| (read without a public
// find call, which would leave NOT_FOUND as this thread's last error).
bool context_has_tensor(const bp_context *ctx, const std::string &name) {
  for (size_t i = 0, n = bp_context_tensor_count(ctx); i < n; ++i)
    if (name == bp_context_tensor(ctx, i)->name) return true;
  return false;
}

constexpr size_t kDefaultChunk = size_t{16} << 20;

struct selected {
  const bp::gguf::tensor_info *info;
  bp_type type;
  bp_tensor *t = nullptr;
};

struct buffers_guard {
  std::vector<bp_buffer *> list;
  std::vector<selected> *made = nullptr;
  bool keep = false;
  ~buffers_guard() {
    if (keep) return;
    for (bp_buffer *b : list) bp_buffer_free(b);
    // The tensors stay in the context, without memory.
    if (made) {
      for (selected &s : *made) {
        if (s.t == nullptr) continue;
        s.t->data = nullptr;
        s.t->buffer = nullptr;
        s.t->buffer_ctx = nullptr;
      }
    }
  }
};

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Mapped path: one buffer over the whole mapping where the tensors' file
// offsets suit the device's alignment, else one buffer per tensor.
bp_status place_mapped(const bp_gguf *f, bp_device *dev, std::vector<selected> &sel, buffers_guard &bufs) {
  const bp::gguf::mapping &m = *f->map;
  auto *base = const_cast<uint8_t *>(m.data);
  bp_buffer *whole = nullptr;
  if (bp_status st = bp_device_buffer_from_host_ptr(dev, base, m.size, &whole); st != BP_OK) return st;
  bufs.list.push_back(whole);
  bool used = false;
  const size_t align = bp_buffer_type_alignment(bp_buffer_buffer_type(whole));
  for (selected &s : sel) {
    const uint64_t at = f->info.data_offset + s.info->offset;
    const bool fits = (reinterpret_cast<uintptr_t>(base) + at) % align == 0;
    if (fits) {
      if (bp_status st = bp_buffer_place_tensor(whole, s.t, static_cast<size_t>(at)); st != BP_OK) return st;
      used = true;
      continue;
    }
    // Its own buffer starting at its first byte: the device sees an
    // address that is not aligned to its usual buffers' alignment; host
    // kernels read unaligned rows (docs/gguf.md).
    bp_buffer *own = nullptr;
    if (bp_status st = bp_device_buffer_from_host_ptr(dev, base + at, static_cast<size_t>(s.info->nbytes), &own);
        st != BP_OK) {
      return st;
    }
    bufs.list.push_back(own);
    if (bp_status st = bp_buffer_place_tensor(own, s.t, 0); st != BP_OK) return st;
  }
  if (!used) {
    bp_buffer_free(whole);
    bufs.list.erase(bufs.list.begin());
  }
  for (bp_buffer *b : bufs.list) bp_buffer_set_usage(b, BP_BUFFER_USAGE_WEIGHTS);
  return BP_OK;
}

// Copies |n| bytes at file offset |at| into |t| at |offset| through |bounce|.
// A host buffer (|host|) gets the bytes read straight into the tensor's
// memory: the same bytes bp_tensor_set would write, one copy fewer.
bp_status copy_range(const bp::gguf::mapping &m, uint64_t at, bp_tensor *t, size_t offset, size_t n,
                     std::vector<uint8_t> &bounce, bool host) {
  if (m.fd < 0) return bp_tensor_set(t, m.data + at, offset, n);  // caller memory: no file to read
  uint8_t *dst = host ? static_cast<uint8_t *>(t->data) + offset : bounce.data();
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(m.fd, dst + got, n - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_load: reading %s at byte %" PRIu64 " failed: %s",
                        m.path.c_str(), at + got, r == 0 ? "the file got shorter" : std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  return host ? BP_OK : bp_tensor_set(t, bounce.data(), offset, n);
}

// Copied path: buffers of the device's type, each at most its maximum size.
bp_status place_copied(const bp_gguf *f, bp_device *dev, bp_buffer_type *chosen, std::vector<selected> &sel,
                       size_t chunk, buffers_guard &bufs) {
  bp_buffer_type *buft = chosen ? chosen : bp_device_buffer_type(dev);
  if (buft == nullptr) return BP_ERR_INVALID_ARGUMENT;
  const size_t align = bp_buffer_type_alignment(buft), max = bp_buffer_type_max_size(buft);
  // Group the tensors: a new buffer when the next one would pass max.
  std::vector<std::pair<size_t, size_t>> groups;  // [first, last) in sel, and each group's size below
  std::vector<uint64_t> offsets(sel.size()), sizes;
  uint64_t size = 0;
  size_t first = 0;
  for (size_t i = 0; i < sel.size(); ++i) {
    const uint64_t need = bp_buffer_type_alloc_size(buft, sel[i].t);
    if (need > max) {
      return set_errorf(BP_ERR_OUT_OF_DEVICE_MEMORY,
                        "bp_gguf_load: tensor '%s' needs %" PRIu64 " bytes, more than one buffer of '%s' holds (%zu)",
                        sel[i].info->name.c_str(), need, bp_buffer_type_name(buft), max);
    }
    uint64_t at = round_up(size, align);
    if (i > first && at + need > max) {
      groups.emplace_back(first, i);
      sizes.push_back(size);
      first = i;
      at = 0;
    }
    offsets[i] = at;
    size = at + need;
  }
  if (!sel.empty()) {
    groups.emplace_back(first, sel.size());
    sizes.push_back(size);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    bp_buffer *b = nullptr;
    if (bp_status st = bp_buffer_type_alloc(buft, static_cast<size_t>(sizes[g]), &b); st != BP_OK) return st;
    bufs.list.push_back(b);
    bp_buffer_set_usage(b, BP_BUFFER_USAGE_WEIGHTS);
    for (size_t i = groups[g].first; i < groups[g].second; ++i) {
      if (bp_status st = bp_buffer_place_tensor(b, sel[i].t, static_cast<size_t>(offsets[i])); st != BP_OK) return st;
    }
  }
  const bool host = bp_buffer_type_is_host(buft);
  std::vector<uint8_t> bounce(f->map->fd >= 0 && !host ? chunk : 0);
  for (selected &s : sel) {
    const uint64_t at = f->info.data_offset + s.info->offset;
    for (uint64_t done = 0; done < s.info->nbytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, s.info->nbytes - done));
      if (bp_status st = copy_range(*f->map, at + done, s.t, static_cast<size_t>(done), n, bounce, host); st != BP_OK) {
        return st;
      }
      done += n;
    }
  }
  return BP_OK;
}

}  // namespace

extern "C" {

BP_API bp_status bp_gguf_load(const bp_gguf *file, bp_context *ctx, bp_device *dev, const bp_gguf_load_options *options,
                              bp_gguf_weights **out_weights) {
  return bp::core::api_guard([&]() -> bp_status {
    const char *fn = "bp_gguf_load";
    if (out_weights == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_weights is NULL", fn);
    *out_weights = nullptr;
    if (!bp::gguf::handle_check(file, bp::core::TAG_GGUF_FILE, fn, "file")) return BP_ERR_INVALID_ARGUMENT;
    if (ctx == nullptr || dev == nullptr)
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: ctx and dev must not be NULL", fn);
    bp_gguf_load_options opt{sizeof(bp_gguf_load_options), BP_GGUF_LOAD_AUTO, nullptr, 0, nullptr};
    if (options != nullptr) {
      // The first version ended at chunk_bytes; later fields are read only
      // when the caller's struct has them.
      constexpr size_t first_size = offsetof(bp_gguf_load_options, buffer_type);
      if (options->struct_size < first_size) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT,
                          "%s: options->struct_size is %u; set it to sizeof(bp_gguf_load_options)", fn,
                          options->struct_size);
      }
      std::memcpy(&opt, options, std::min<size_t>(options->struct_size, sizeof opt));
      opt.struct_size = sizeof opt;
    }
    if (opt.buffer_type != nullptr) {
      if (opt.mode == BP_GGUF_LOAD_MAP) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT,
                          "%s: options->buffer_type asks for a copy and mode is BP_GGUF_LOAD_MAP: use AUTO or COPY",
                          fn);
      }
      if (bp_buffer_type_device(opt.buffer_type) != dev) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: options->buffer_type '%s' is not a buffer type of this device",
                          fn, bp_buffer_type_name(opt.buffer_type));
      }
      opt.mode = BP_GGUF_LOAD_COPY;
    }
    if (opt.mode != BP_GGUF_LOAD_AUTO && opt.mode != BP_GGUF_LOAD_MAP && opt.mode != BP_GGUF_LOAD_COPY) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: unknown mode %d: use BP_GGUF_LOAD_*", fn, (int)opt.mode);
    }
    const size_t chunk = opt.chunk_bytes ? opt.chunk_bytes : kDefaultChunk;
    bp_device_info di{};
    di.struct_size = sizeof di;
    if (bp_status st = bp_device_describe(dev, &di); st != BP_OK) return st;

    // Choose and check everything before making anything.
    std::vector<selected> sel;
    for (const bp::gguf::tensor_info &t : file->info.tensors) {
      if (opt.name_filter && *opt.name_filter && fnmatch(opt.name_filter, t.name.c_str(), 0) != 0) continue;
      bp_type type{};
      if (!bp::gguf::backplane_type_of(t.type, &type)) {
        return set_errorf(BP_ERR_UNIMPLEMENTED,
                          "%s: tensor '%s' has type %s (id %u), which Backplane does not hold: leave it out with a "
                          "name_filter, or convert the file",
                          fn, t.name.c_str(), bp::gguf::find_tensor_type(t.type)->name, t.type);
      }
      if (t.name.size() >= BP_MAX_NAME) {
        return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor name '%s' is %zu bytes; Backplane names hold at most %d",
                          fn, t.name.c_str(), t.name.size(), BP_MAX_NAME - 1);
      }
      if (context_has_tensor(ctx, t.name)) {
        return set_errorf(BP_ERR_ALREADY_EXISTS, "%s: the context already has a tensor named '%s'", fn, t.name.c_str());
      }
      sel.push_back({&t, type});
    }
    const bool can_map = (di.caps & BP_DEVICE_CAP_HOST_MEMORY) && (di.caps & BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR);
    if (opt.mode == BP_GGUF_LOAD_MAP && !can_map) {
      return set_errorf(BP_ERR_UNIMPLEMENTED,
                        "%s: device '%s' cannot compute on mapped host memory: load with BP_GGUF_LOAD_COPY or AUTO", fn,
                        di.spec);
    }

    auto w = std::make_unique<bp_gguf_weights>();
    buffers_guard bufs;
    bufs.made = &sel;
    for (selected &s : sel) {
      s.t = bp_tensor_new(ctx, s.type, static_cast<int>(s.info->n_dims), s.info->ne);
      if (s.t == nullptr) return bp_last_status();
      bp_tensor_set_name(s.t, s.info->name.c_str());
      bp_tensor_set_flags(s.t, BP_TENSOR_FLAG_PARAM);
      if (bp_tensor_nbytes(s.t) != s.info->nbytes) {
        return set_errorf(BP_ERR_INTERNAL, "%s: tensor '%s' takes %zu bytes in Backplane and %" PRIu64 " in the file",
                          fn, s.info->name.c_str(), bp_tensor_nbytes(s.t), s.info->nbytes);
      }
      w->bytes += s.info->nbytes;
    }
    bool mapped = false;
    if (can_map && opt.mode != BP_GGUF_LOAD_COPY) {
      bp_status st = place_mapped(file, dev, sel, bufs);
      if (st == BP_OK) {
        mapped = true;
      } else if (opt.mode == BP_GGUF_LOAD_MAP) {
        return st;
      } else {
        // AUTO: the device refused the pages; copy instead.
        bp::core::logf(BP_LOG_INFO, "core", "gguf: mapping refused (%s); copying", bp_last_error());
        for (bp_buffer *b : bufs.list) bp_buffer_free(b);
        bufs.list.clear();
        for (selected &s : sel) s.t->data = nullptr, s.t->buffer = nullptr, s.t->buffer_ctx = nullptr;
      }
    }
    if (!mapped) {
      if (bp_status st = place_copied(file, dev, opt.buffer_type, sel, chunk, bufs); st != BP_OK) return st;
    }
    bufs.keep = true;
    w->buffers = std::move(bufs.list);
    w->n_tensors = sel.size();
    w->mapped = mapped;
    if (mapped) w->map = file->map;
    *out_weights = w.release();
    return BP_OK;
  });
}

BP_API void bp_gguf_weights_free(bp_gguf_weights *weights) {
  BP_API_SCOPE();
  if (weights == nullptr) return;
  // Asks the set of live handles before reading |weights| (a second free).
  if (!bp::core::free_check(weights, bp::core::TAG_GGUF_WEIGHTS, "bp_gguf_weights_free", "weights")) return;
  for (bp_buffer *b : weights->buffers) bp_buffer_free(b);
  bp::core::retire_handle(weights);
}

static bool weights_ok(const bp_gguf_weights *w, const char *fn) {
  return bp::gguf::handle_check(w, bp::core::TAG_GGUF_WEIGHTS, fn, "weights");
}

BP_API bool bp_gguf_weights_mapped(const bp_gguf_weights *weights) {
  BP_API_SCOPE();
  return weights_ok(weights, "bp_gguf_weights_mapped") && weights->mapped;
}

BP_API size_t bp_gguf_weights_tensor_count(const bp_gguf_weights *weights) {
  BP_API_SCOPE();
  return weights_ok(weights, "bp_gguf_weights_tensor_count") ? weights->n_tensors : 0;
}

BP_API uint64_t bp_gguf_weights_bytes(const bp_gguf_weights *weights) {
  BP_API_SCOPE();
  return weights_ok(weights, "bp_gguf_weights_bytes") ? weights->bytes : 0;
}

BP_API size_t bp_gguf_weights_buffer_count(const bp_gguf_weights *weights) {
  BP_API_SCOPE();
  return weights_ok(weights, "bp_gguf_weights_buffer_count") ? weights->buffers.size() : 0;
}

BP_API bp_buffer *bp_gguf_weights_buffer(const bp_gguf_weights *weights, size_t i) {
  BP_API_SCOPE();
  if (!weights_ok(weights, "bp_gguf_weights_buffer")) return nullptr;
  if (i >= weights->buffers.size()) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_gguf_weights_buffer: buffer %zu is past the %zu buffers", i,
               weights->buffers.size());
    return nullptr;
  }
  return weights->buffers[i];
}

}  // extern "C"
