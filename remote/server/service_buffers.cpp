// service_buffers.cpp: buffers and the data that moves in and out of them
// (service_core.hpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include "protocol.hpp"
#include "service_core.hpp"
#include "service_util.hpp"

namespace bp::remote::server {

using lock = std::lock_guard<std::mutex>;

grpc::Status service_core::buffer_alloc(const call_meta &m, const pb::BufferAllocRequest &req,
                                        pb::BufferAllocReply *reply) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (req.device() >= opt_.devices.size()) return no_device(req.device(), opt_.devices.size());
    // Rounded up to even: the byte tensor over the buffer is f16.
    if (req.size() > (uint64_t{1} << 62)) return invalid("BufferAlloc: " + std::to_string(req.size()) + " bytes");
    const uint64_t allocated = (req.size() + 1) & ~uint64_t{1};
    if (grpc::Status st = check_handles(s); !st.ok()) return st;
    if (opt_.max_memory != 0 && (allocated > opt_.max_memory || s.memory_used > opt_.max_memory - allocated)) {
      const std::string why = "BufferAlloc of " + std::to_string(req.size()) + " bytes: the session holds " +
                              std::to_string(s.memory_used) + " of its " + std::to_string(opt_.max_memory) +
                              " byte quota (--max-memory)";
      log_refusal(s, refusal::memory, why);
      return exhausted(why);
    }
    bp_buffer_type *buft = bp_device_buffer_type(opt_.devices[req.device()]);
    if (buft == nullptr) return from_last_error("BufferAlloc: ");
    auto b = std::make_unique<remote_buffer>();
    b->device = req.device();
    b->size = req.size();
    b->allocated = allocated;
    if (bp_buffer_type_alloc(buft, static_cast<size_t>(allocated), &b->buffer) != BP_OK) {
      return from_last_error("BufferAlloc of " + std::to_string(req.size()) + " bytes: ");
    }
    // Device allocators hand out memory as they find it: another session's
    // freed bytes, or the server's own heap. Every buffer reads as zeros
    // until its client writes it.
    if (allocated > 0 && bp_buffer_clear(b->buffer, 0) != BP_OK) return from_last_error("BufferAlloc: clearing: ");
    if (allocated > 0) {
      b->ctx = bp_context_new(1);
      b->bytes = b->ctx ? bp_tensor_new_1d(b->ctx, BP_TYPE_F16, static_cast<int64_t>(allocated / 2)) : nullptr;
      if (b->bytes == nullptr || bp_buffer_place_tensor(b->buffer, b->bytes, 0) != BP_OK) {
        return from_last_error("BufferAlloc: ");
      }
    }
    const uint64_t h = s.new_handle();
    if (h == 0) return no_randomness();
    s.memory_used += allocated;
    s.buffers.emplace(h, std::move(b));
    reply->set_id(h);
    reply->set_size(req.size());
    return grpc::Status::OK;
  });
}

grpc::Status service_core::buffer_free(const call_meta &m, const pb::Handle &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (!find_buffer(s, req.id())) return no_buffer(req.id());
    s.drop_graphs_using(0, req.id());
    s.erase_buffer(req.id());
    return grpc::Status::OK;
  });
}

grpc::Status service_core::buffer_clear(const call_meta &m, const pb::BufferClearRequest &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (req.value() > 255) return invalid("BufferClear: value " + std::to_string(req.value()) + " is not a byte");
    remote_buffer *b = find_buffer(s, req.buffer());
    if (!b) return no_buffer(req.buffer());
    if (bp_buffer_clear(b->buffer, static_cast<uint8_t>(req.value())) != BP_OK) {
      return from_last_error("BufferClear: ");
    }
    return grpc::Status::OK;
  });
}

grpc::Status service_core::buffer_memset(const call_meta &m, const pb::BufferMemsetRequest &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    if (req.value() > 255) return invalid("BufferMemset: value " + std::to_string(req.value()) + " is not a byte");
    remote_buffer *b = find_buffer(s, req.buffer());
    if (!b) return no_buffer(req.buffer());
    if (!inside(req.offset(), req.size(), b->size)) {
      return invalid("BufferMemset: " + range_text(req.offset(), req.size(), b->size));
    }
    if (req.size() == 0) return grpc::Status::OK;
    if (bp_tensor_memset(b->bytes, static_cast<uint8_t>(req.value()), req.offset(), req.size()) != BP_OK) {
      return from_last_error("BufferMemset: ");
    }
    return grpc::Status::OK;
  });
}

grpc::Status service_core::set_tensor_begin(const call_meta &m, set_stream *st) { return enter(m, &st->call); }

grpc::Status service_core::set_tensor_chunk(set_stream *st, const pb::SetTensorChunk &msg) {
  if (!st->call.s) return {grpc::StatusCode::INTERNAL, "SetTensor: chunk before begin"};
  session &s = *st->call.s;
  lock l(s.mu);
  if (s.closed) return closed_session();
  if (!st->have_header) {
    if (!msg.has_header()) return invalid("SetTensor: the first message must carry the header");
    const pb::SetTensorHeader &h = msg.header();
    remote_buffer *b = find_buffer(s, h.buffer());
    if (!b) return no_buffer(h.buffer());
    if (!inside(h.offset(), h.size(), b->size))
      return invalid("SetTensor: " + range_text(h.offset(), h.size(), b->size));
    st->have_header = true;
    st->buffer = h.buffer();
    st->offset = h.offset();
    st->size = h.size();
  } else if (msg.has_header()) {
    return invalid("SetTensor: only the first message carries a header");
  }
  const std::string &data = msg.data();
  if (data.empty()) return grpc::Status::OK;
  if (data.size() > st->size - st->written) {
    return invalid("SetTensor: " + std::to_string(st->written + data.size()) + " bytes sent, the header announced " +
                   std::to_string(st->size));
  }
  // Looked up again: the buffer may have been freed between two messages.
  remote_buffer *b = find_buffer(s, st->buffer);
  if (!b) return no_buffer(st->buffer);
  if (bp_tensor_set(b->bytes, data.data(), st->offset + st->written, data.size()) != BP_OK) {
    return from_last_error("SetTensor: ");
  }
  st->written += data.size();
  return grpc::Status::OK;
}

grpc::Status service_core::set_tensor_finish(set_stream *st) {
  if (!st->have_header) return invalid("SetTensor: the stream ended without a header");
  if (st->written != st->size) {
    return invalid("SetTensor: the stream ended after " + std::to_string(st->written) + " of the " +
                   std::to_string(st->size) + " bytes its header announced");
  }
  return grpc::Status::OK;
}

grpc::Status service_core::get_tensor(const call_meta &m, const pb::GetTensorRequest &req,
                                      const std::function<bool(const pb::DataChunk &)> &write) {
  session_call call;
  if (grpc::Status st = enter(m, &call); !st.ok()) return st;
  session &s = *call.s;
  const uint64_t chunk = req.chunk_bytes() == 0 ? k_default_chunk_bytes : req.chunk_bytes();
  if (chunk > k_max_chunk_bytes) {
    return invalid("GetTensor: chunk_bytes " + std::to_string(chunk) + " is above the limit " +
                   std::to_string(k_max_chunk_bytes));
  }
  pb::DataChunk out;
  for (uint64_t done = 0;;) {
    {
      // Each chunk is read under the session's lock, which is let go while
      // the chunk waits for the peer: a reader that stops holds nothing but
      // its own call (and the stream deadline ends it).
      lock l(s.mu);
      if (s.closed) return closed_session();
      remote_buffer *b = find_buffer(s, req.buffer());
      if (!b) return no_buffer(req.buffer());
      if (!inside(req.offset(), req.size(), b->size)) {
        return invalid("GetTensor: " + range_text(req.offset(), req.size(), b->size));
      }
      if (done == req.size()) return grpc::Status::OK;
      const uint64_t n = std::min<uint64_t>(chunk, req.size() - done);
      std::string *data = out.mutable_data();
      data->resize(n);
      if (bp_tensor_get(b->bytes, data->data(), req.offset() + done, n) != BP_OK) {
        return from_last_error("GetTensor: ");
      }
      done += n;
    }
    if (!write(out)) return {grpc::StatusCode::CANCELLED, "GetTensor: the client went away"};
  }
}

grpc::Status service_core::copy_buffer(const call_meta &m, const pb::CopyBufferRequest &req) {
  return with_session(m, [&](session &s) -> grpc::Status {
    remote_buffer *src = find_buffer(s, req.src_buffer());
    if (!src) return no_buffer(req.src_buffer());
    remote_buffer *dst = find_buffer(s, req.dst_buffer());
    if (!dst) return no_buffer(req.dst_buffer());
    if (!inside(req.src_offset(), req.size(), src->size)) {
      return invalid("CopyBuffer source: " + range_text(req.src_offset(), req.size(), src->size));
    }
    if (!inside(req.dst_offset(), req.size(), dst->size)) {
      return invalid("CopyBuffer destination: " + range_text(req.dst_offset(), req.size(), dst->size));
    }
    if (req.size() == 0) return grpc::Status::OK;
    if (src == dst && req.src_offset() < req.dst_offset() + req.size() &&
        req.dst_offset() < req.src_offset() + req.size()) {
      return invalid("CopyBuffer: the source and destination ranges overlap");
    }
    // Even offsets and size: f16 views of both, copied by the plugins
    // (device to device where they can). Otherwise through host memory, a
    // chunk at a time.
    if (req.src_offset() % 2 == 0 && req.dst_offset() % 2 == 0 && req.size() % 2 == 0) {
      bp_context *ctx = bp_context_new(2);
      const int64_t n = static_cast<int64_t>(req.size() / 2);
      bp_tensor *a = ctx ? bp_view_1d(ctx, src->bytes, n, req.src_offset()) : nullptr;
      bp_tensor *b = a ? bp_view_1d(ctx, dst->bytes, n, req.dst_offset()) : nullptr;
      const bool ok = b != nullptr && bp_tensor_copy(a, b) == BP_OK;
      grpc::Status st = ok ? grpc::Status::OK : from_last_error("CopyBuffer: ");
      bp_context_free(ctx);
      return st;
    }
    std::vector<char> tmp(std::min<uint64_t>(req.size(), k_default_chunk_bytes));
    for (uint64_t done = 0; done < req.size();) {
      const uint64_t n = std::min<uint64_t>(tmp.size(), req.size() - done);
      if (bp_tensor_get(src->bytes, tmp.data(), req.src_offset() + done, n) != BP_OK ||
          bp_tensor_set(dst->bytes, tmp.data(), req.dst_offset() + done, n) != BP_OK) {
        return from_last_error("CopyBuffer: ");
      }
      done += n;
    }
    return grpc::Status::OK;
  });
}

}  // namespace bp::remote::server
