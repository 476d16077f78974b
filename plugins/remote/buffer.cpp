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

#include "buffer_slots.hpp"
#include "remote.hpp"

namespace bp::remote_plugin {
namespace {

remote_buffer *as_buffer(void *buf) {
  auto *b = static_cast<remote_buffer *>(buf);
  return b && b->magic == remote_buffer{}.magic ? b : nullptr;
}

int64_t timeout_of(const remote_buffer *b) { return b->dev->plugin->config.timeout_ms; }
size_t chunk_of(const remote_buffer *b) { return b->dev->plugin->config.chunk_bytes; }
pb::Remote::Stub *stub(const remote_buffer *b) { return b->sess->server->stub.get(); }

// The transport of plugins::buffer_slots: calls to the server of the
// buffer's session; a range outside the buffer is never sent.
struct remote_transport {
  using buffer = remote_buffer;
  using type_ctx = device_state;
  static constexpr const char *default_name = "remote";
  static constexpr size_t default_alignment = 64;
  static constexpr const char *copy_where = "between buffers of one server session";

  static remote_buffer *as_buffer(void *buf) { return remote_plugin::as_buffer(buf); }
  static bp_status alive(remote_buffer *b, bp_error *err) { return session_check(b->sess.get(), err); }
  static plugins::memory_window window(const remote_buffer *b) { return {b->base, b->size}; }
  static void destroy(remote_buffer *b) {
    // A lost session freed everything on the server already.
    if (b->sess && !b->sess->lost.load()) {
      call c(b->sess.get(), timeout_of(b));
      pb::Handle req;
      req.set_id(b->handle);
      pb::Empty reply;
      const grpc::Status st = stub(b)->BufferFree(c.ctx(), req, &reply);
      if (!st.ok())
        bp_host_logf(b->dev->plugin->host, BP_LOG_WARN, "freeing buffer %" PRIu64 " on %s: %s", b->handle,
                     b->sess->server->address.c_str(), st.error_message().c_str());
    }
    delete b;
  }
  static bp_status write(remote_buffer *b, const bp_tensor *, size_t at, const void *data, size_t size, bp_error *err) {
    return write_bytes(b, at, data, size, chunk_of(b), timeout_of(b), err);
  }
  static bp_status read(remote_buffer *b, const bp_tensor *, size_t at, void *data, size_t size, bp_error *err) {
    return read_bytes(b, at, data, size, chunk_of(b), timeout_of(b), err);
  }
  static bp_status fill(remote_buffer *b, const bp_tensor *, size_t at, uint8_t value, size_t size, bp_error *err) {
    call c(b->sess.get(), timeout_of(b), transfer_extra_ms(size));
    pb::BufferMemsetRequest req;
    req.set_buffer(b->handle);
    req.set_offset(at);
    req.set_size(size);
    req.set_value(value);
    pb::Empty reply;
    const grpc::Status st = stub(b)->BufferMemset(c.ctx(), req, &reply);
    return st.ok() ? BP_OK : rpc_failed(b->sess.get(), st, "BufferMemset", err);
  }
  static bp_status clear(remote_buffer *b, uint8_t value, bp_error *err) {
    call c(b->sess.get(), timeout_of(b), transfer_extra_ms(b->size));
    pb::BufferClearRequest req;
    req.set_buffer(b->handle);
    req.set_value(value);
    pb::Empty reply;
    const grpc::Status st = stub(b)->BufferClear(c.ctx(), req, &reply);
    return st.ok() ? BP_OK : rpc_failed(b->sess.get(), st, "BufferClear", err);
  }
  static remote_buffer *source_of(const bp_tensor *src) { return buffer_of(src); }
  static bool same_memory(const remote_buffer *src, const remote_buffer *dst) { return src->sess == dst->sess; }
  static bp_status copy(remote_buffer *src, size_t src_at, remote_buffer *dst, size_t dst_at, size_t n,
                        const bp_tensor *, bp_error *err) {
    call c(dst->sess.get(), timeout_of(dst), transfer_extra_ms(n));
    pb::CopyBufferRequest req;
    req.set_src_buffer(src->handle);
    req.set_src_offset(src_at);
    req.set_dst_buffer(dst->handle);
    req.set_dst_offset(dst_at);
    req.set_size(n);
    pb::Empty reply;
    const grpc::Status st = stub(dst)->CopyBuffer(c.ctx(), req, &reply);
    return st.ok() ? BP_OK : rpc_failed(dst->sess.get(), st, "CopyBuffer", err);
  }

  static const char *name(const device_state *dev) { return dev->id.c_str(); }
  static bp_status alloc(device_state *dev, size_t size, remote_buffer **out, bp_error *err) {
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
    if (!b) return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->dev = dev;
    b->sess = std::move(sess);
    b->handle = reply.id();
    b->size = size;
    b->base = plugins::opaque_range(dev->plugin->next_base, size, dev->alignment);
    *out = b;
    return BP_OK;
  }
  static size_t alignment(const device_state *dev) { return dev->alignment; }
  static size_t max_size(const device_state *dev) { return dev->max_size ? dev->max_size : SIZE_MAX; }
  static bool is_host(const device_state *) { return false; }
};

using slots = plugins::buffer_slots<remote_transport>;

}  // namespace

const bp_buffer_type_i &buffer_type_iface = slots::type_table;

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

bp_buffer_type_ref buffer_type_of(device_state *dev) { return bp_buffer_type_ref{&buffer_type_iface, dev}; }

remote_buffer *buffer_of(const bp_tensor *t) {
  if (!t || !t->buffer_ctx) return nullptr;
  return as_buffer(t->buffer_ctx);
}

}  // namespace bp::remote_plugin
