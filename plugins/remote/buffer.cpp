// buffer.cpp: the buffer type of a remote device and its buffers. A buffer
// is a handle the server chose (BufferAlloc) in one session; base() is an
// opaque address (never dereferenced) unique to the buffer, so a tensor's
// offset is data - base. Transfers are streamed in chunk_bytes pieces
// (SetTensor, GetTensor): any size works and a transfer never holds more
// than one chunk in memory on either side.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "remote.hpp"

namespace bp::remote_plugin {
namespace {

remote_buffer *as_buffer(void *buf) {
  auto *b = static_cast<remote_buffer *>(buf);
  return b && b->magic == remote_buffer{}.magic ? b : nullptr;
}

uint64_t offset_of(const bp_tensor *t, const remote_buffer *b) {
  return static_cast<uint64_t>(static_cast<const char *>(t->data) - b->base);
}

// The session's liveness first, then the shared range check: a range
// outside the buffer is never sent.
bp_status check_range(const remote_buffer *b, const bp_tensor *t, size_t offset, size_t size, const char *what,
                      bp_error *err) {
  if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s needs a buffer", what);
  if (bp_status s = session_check(b->sess.get(), err); s != BP_OK) return s;
  return plugins::window_check({b->base, b->size}, t, offset, size, what, err);
}

int64_t timeout_of(const remote_buffer *b) { return b->dev->plugin->config.timeout_ms; }
size_t chunk_of(const remote_buffer *b) { return b->dev->plugin->config.chunk_bytes; }

void buffer_free(void *buf) noexcept {
  remote_buffer *b = as_buffer(buf);
  if (!b) return;
  // A lost session freed everything on the server already.
  if (b->sess && !b->sess->lost.load()) {
    call c(b->sess.get(), timeout_of(b));
    pb::Handle req;
    req.set_id(b->handle);
    pb::Empty reply;
    const grpc::Status st = b->sess->server->stub->BufferFree(c.ctx(), req, &reply);
    if (!st.ok())
      bp_host_logf(b->dev->plugin->host, BP_LOG_WARN, "freeing buffer %" PRIu64 " on %s: %s", b->handle,
                   b->sess->server->address.c_str(), st.error_message().c_str());
  }
  delete b;
}

void *buffer_base(void *buf) noexcept {
  remote_buffer *b = as_buffer(buf);
  return b ? b->base : nullptr;
}

bp_status buffer_set_tensor(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    remote_buffer *b = as_buffer(buf);
    bp_status s = check_range(b, t, offset, size, "set_tensor", err);
    if (s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "set_tensor with NULL data");
    return write_bytes(b, offset_of(t, b) + offset, data, size, chunk_of(b), timeout_of(b), err);
  });
}

bp_status buffer_get_tensor(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    remote_buffer *b = as_buffer(buf);
    bp_status s = check_range(b, t, offset, size, "get_tensor", err);
    if (s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "get_tensor with NULL data");
    return read_bytes(b, offset_of(t, b) + offset, data, size, chunk_of(b), timeout_of(b), err);
  });
}

bp_status buffer_memset_tensor(void *buf, bp_tensor *t, uint8_t value, size_t offset, size_t size,
                               bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    remote_buffer *b = as_buffer(buf);
    bp_status s = check_range(b, t, offset, size, "memset_tensor", err);
    if (s != BP_OK || size == 0) return s;
    call c(b->sess.get(), timeout_of(b), transfer_extra_ms(size));
    pb::BufferMemsetRequest req;
    req.set_buffer(b->handle);
    req.set_offset(offset_of(t, b) + offset);
    req.set_size(size);
    req.set_value(value);
    pb::Empty reply;
    const grpc::Status st = b->sess->server->stub->BufferMemset(c.ctx(), req, &reply);
    return st.ok() ? BP_OK : rpc_failed(b->sess.get(), st, "BufferMemset", err);
  });
}

bp_status buffer_copy_tensor(void *buf, const bp_tensor *src, bp_tensor *dst, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    remote_buffer *db = as_buffer(buf);
    if (!db) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "copy_tensor needs a buffer");
    remote_buffer *sb = src ? buffer_of(src) : nullptr;
    // Server-side copies only between buffers of one session; anything else
    // goes through the host's generic path.
    if (bp_status s = plugins::copy_precondition(sb && sb->sess == db->sess, src, dst,
                                                 "between buffers of one server session", err);
        s != BP_OK)
      return s;
    const size_t n = bp_tensor_nbytes(src);
    if (bp_status s = check_range(db, dst, 0, n, "copy_tensor", err); s != BP_OK || n == 0) return s;
    if (bp_status s = check_range(sb, src, 0, n, "copy_tensor", err); s != BP_OK) return s;
    call c(db->sess.get(), timeout_of(db), transfer_extra_ms(n));
    pb::CopyBufferRequest req;
    req.set_src_buffer(sb->handle);
    req.set_src_offset(offset_of(src, sb));
    req.set_dst_buffer(db->handle);
    req.set_dst_offset(offset_of(dst, db));
    req.set_size(n);
    pb::Empty reply;
    const grpc::Status st = db->sess->server->stub->CopyBuffer(c.ctx(), req, &reply);
    return st.ok() ? BP_OK : rpc_failed(db->sess.get(), st, "CopyBuffer", err);
  });
}

bp_status buffer_clear(void *buf, uint8_t value, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    remote_buffer *b = as_buffer(buf);
    if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "clear needs a buffer");
    if (bp_status s = session_check(b->sess.get(), err); s != BP_OK) return s;
    call c(b->sess.get(), timeout_of(b), transfer_extra_ms(b->size));
    pb::BufferClearRequest req;
    req.set_buffer(b->handle);
    req.set_value(value);
    pb::Empty reply;
    const grpc::Status st = b->sess->server->stub->BufferClear(c.ctx(), req, &reply);
    return st.ok() ? BP_OK : rpc_failed(b->sess.get(), st, "BufferClear", err);
  });
}

const char *buft_name(void *ctx) noexcept {
  auto *dev = static_cast<device_state *>(ctx);
  return dev ? dev->id.c_str() : "remote";
}

bp_status buft_alloc(void *ctx, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *dev = static_cast<device_state *>(ctx);
    if (!dev || !out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "alloc needs a buffer type and an out ref");
    out->iface = nullptr;
    out->ctx = nullptr;
    if (dev->max_size && size > dev->max_size)
      return bp_error_setf(err, BP_ERR_OUT_OF_DEVICE_MEMORY,
                           "%zu bytes exceed the largest single buffer of '%s' (%zu bytes); split the tensors over "
                           "several buffers",
                           size, dev->name.c_str(), dev->max_size);
    std::shared_ptr<session> sess;
    if (bp_status s = server_session(dev->server, true, &sess, err); s != BP_OK) return s;
    call c(sess.get(), dev->plugin->config.timeout_ms);
    pb::BufferAllocRequest req;
    req.set_device(dev->remote_index);
    req.set_size(size);
    pb::BufferAllocReply reply;
    const grpc::Status st = dev->server->stub->BufferAlloc(c.ctx(), req, &reply);
    if (!st.ok()) return rpc_failed(sess.get(), st, "BufferAlloc", err);
    auto *b = new (std::nothrow) remote_buffer();
    if (!b) return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->dev = dev;
    b->sess = std::move(sess);
    b->handle = reply.id();
    b->size = size;
    // A fresh aligned range of the opaque address space, with a gap.
    const uint64_t align = dev->alignment;
    const uint64_t span = (static_cast<uint64_t>(size) + 2 * align + 4095) & ~uint64_t(4095);
    uint64_t at = dev->plugin->next_base.fetch_add(span + align);
    at = (at + align - 1) & ~(align - 1);
    b->base = reinterpret_cast<char *>(at);
    out->iface = &buffer_iface;
    out->ctx = b;
    return BP_OK;
  });
}

size_t buft_alignment(void *ctx) noexcept {
  auto *dev = static_cast<device_state *>(ctx);
  return dev ? dev->alignment : 64;
}

size_t buft_max_size(void *ctx) noexcept {
  auto *dev = static_cast<device_state *>(ctx);
  return dev && dev->max_size ? dev->max_size : SIZE_MAX;
}

int buft_is_host(void *) noexcept { return 0; }

}  // namespace

bp_status write_bytes(remote_buffer *b, uint64_t at, const void *data, size_t size, size_t chunk_bytes,
                      int64_t timeout_ms, bp_error *err) {
  session *s = b->sess.get();
  call c(s, timeout_ms, transfer_extra_ms(size));
  pb::Empty reply;
  auto writer = s->server->stub->SetTensor(c.ctx(), &reply);
  const char *p = static_cast<const char *>(data);
  size_t done = 0;
  bool first = true;
  pb::SetTensorChunk chunk;
  while (done < size || first) {
    chunk.Clear();
    if (first) {
      pb::SetTensorHeader *h = chunk.mutable_header();
      h->set_buffer(b->handle);
      h->set_offset(at);
      h->set_size(size);
      first = false;
    }
    const size_t n = std::min(chunk_bytes, size - done);
    chunk.set_data(p + done, n);
    done += n;
    // The last chunk goes out with the end of the stream in one frame.
    grpc::WriteOptions opt;
    if (done == size) opt.set_last_message();
    if (!writer->Write(chunk, opt)) break;  // the stream broke: Finish says why
  }
  if (done < size) writer->WritesDone();
  const grpc::Status st = writer->Finish();
  return st.ok() ? BP_OK : rpc_failed(s, st, "SetTensor", err);
}

bp_status read_bytes(remote_buffer *b, uint64_t at, void *data, size_t size, size_t chunk_bytes, int64_t timeout_ms,
                     bp_error *err) {
  session *s = b->sess.get();
  call c(s, timeout_ms, transfer_extra_ms(size));
  pb::GetTensorRequest req;
  req.set_buffer(b->handle);
  req.set_offset(at);
  req.set_size(size);
  req.set_chunk_bytes(chunk_bytes);
  auto reader = s->server->stub->GetTensor(c.ctx(), req);
  char *p = static_cast<char *>(data);
  size_t done = 0;
  bool overrun = false;
  pb::DataChunk chunk;
  while (reader->Read(&chunk)) {
    const std::string &d = chunk.data();
    if (d.size() > size - done) {
      overrun = true;
      c.ctx()->TryCancel();
      break;
    }
    std::memcpy(p + done, d.data(), d.size());
    done += d.size();
  }
  const grpc::Status st = reader->Finish();
  if (overrun)
    return bp_error_setf(err, BP_ERR_INTERNAL, "server %s sent more than the %zu bytes GetTensor asked for",
                         s->server->address.c_str(), size);
  if (!st.ok()) return rpc_failed(s, st, "GetTensor", err);
  if (done != size)
    return bp_error_setf(err, BP_ERR_INTERNAL, "server %s sent %zu of the %zu bytes GetTensor asked for",
                         s->server->address.c_str(), done, size);
  return BP_OK;
}

const bp_buffer_i buffer_iface = {
    sizeof(bp_buffer_i),
    buffer_free,
    buffer_base,
    nullptr,  // init_tensor: nothing per tensor
    buffer_set_tensor,
    buffer_get_tensor,
    buffer_memset_tensor,
    buffer_copy_tensor,
    buffer_clear,
    nullptr,  // reset
    nullptr,  // set_usage
};

const bp_buffer_type_i buffer_type_iface = {
    sizeof(bp_buffer_type_i),
    buft_name,
    buft_alloc,
    buft_alignment,
    buft_max_size,
    nullptr,  // alloc_size: bp_tensor_nbytes
    buft_is_host,
};

bp_buffer_type_ref buffer_type_of(device_state *dev) { return bp_buffer_type_ref{&buffer_type_iface, dev}; }

remote_buffer *buffer_of(const bp_tensor *t) {
  if (!t || !t->buffer_ctx) return nullptr;
  return as_buffer(t->buffer_ctx);
}

}  // namespace bp::remote_plugin
