// remote_request_fuzz.cpp: libFuzzer target for bp-serve's request handling
// (remote/server). The first byte picks a message type, the rest is parsed
// as that protobuf message and handed to the service core's handler, as
// gRPC would after receiving it. Handle values 1, 2 and 3 are replaced with
// the session's two buffers and its backend, so inputs reach past the
// handle lookup; other values stay as they are (and must be NOT_FOUND).
//
// Built with the rest of the tree instrumented (clang):
//
//   CC=clang CXX=clang++ BUILD_DIR=build-fuzz BUILD_TYPE=RelWithDebInfo
//     BUILD_TARGETS=remote_request_fuzz bash scripts/build.sh
//     -DBP_SANITIZE=address,undefined,fuzzer-no-link -DBP_FUZZ=ON
//   (one command), then
//   build-fuzz/bin/remote_request_fuzz -max_len=4096 -runs=200000
//     tests/fuzz/corpus/remote_request
//
// The corpus (seeds and any crash reproducer, named regress-<what>) is
// replayed through this same function by the ctest suite
// (tests/remote/server/fuzz_corpus_test.cpp compiles this file in).
//
// The oracle: no crash, no sanitizer report, and no status the protocol
// does not name for bad input (UNKNOWN means an exception escaped).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "protocol.hpp"
#include "service_core.hpp"

namespace {

namespace srv = bp::remote::server;
namespace pb = ::backplane::remote::v1;

struct harness {
  std::unique_ptr<srv::service_core> core;
  std::string token = "fuzz", session;
  uint64_t handles[4] = {};  // [1], [2]: buffers of 4096 bytes, [3]: a backend

  srv::call_meta meta() const {
    srv::call_meta m;
    m.token = &token;
    m.session = &session;
    return m;
  }

  harness() {
    bp_log_set_level(BP_LOG_OFF);
    // Parse failures (invalid UTF-8 in a string field) are expected here.
    google::protobuf::SetLogHandler(nullptr);
    srv::service_options o;
    o.token = token;
    o.max_memory = 1 << 20;
    o.max_handles = 64;
    for (size_t i = 0; i < bp_device_count(); ++i) {
      bp_device_info info{};
      info.struct_size = sizeof info;
      bp_device *d = bp_device_get(i);
      if (bp_device_describe(d, &info) == BP_OK && info.plugin && std::string(bp_plugin_name(info.plugin)) == "cpu")
        o.devices.push_back(d);
    }
    if (o.devices.empty()) std::abort();  // the cpu plugin must be found
    core = std::make_unique<srv::service_core>(o);
    pb::HelloRequest q;
    q.set_protocol_version(bp::remote::k_protocol_version);
    q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
    pb::HelloReply r;
    srv::call_meta hello_meta;
    hello_meta.token = &token;
    if (!core->hello(hello_meta, q, &r).ok()) std::abort();
    session = r.session();
    for (int i = 1; i <= 2; ++i) {
      pb::BufferAllocRequest a;
      a.set_size(4096);
      pb::BufferAllocReply ar;
      if (!core->buffer_alloc(meta(), a, &ar).ok()) std::abort();
      handles[i] = ar.id();
    }
    pb::BackendOpenRequest b;
    pb::Param *p = b.add_params();
    p->set_key("threads");
    p->set_value("1");
    pb::Handle h;
    if (!core->backend_open(meta(), b, &h).ok()) std::abort();
    handles[3] = h.id();
  }

  uint64_t map(uint64_t v) const { return v >= 1 && v <= 3 ? handles[v] : v; }
};

// Never destroyed: a static destructor would call Backplane after this
// thread's error state (a thread_local) is gone at exit.
harness &state() {
  static harness *h = new harness;
  return *h;
}

void check(const grpc::Status &st) {
  if (st.error_code() == grpc::StatusCode::UNKNOWN) std::abort();
}

void map_descs(const harness &h, google::protobuf::RepeatedPtrField<pb::TensorDesc> *descs) {
  for (pb::TensorDesc &d : *descs) d.set_buffer(h.map(d.buffer()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  harness &h = state();
  const uint8_t kind = data[0] % 6;
  const void *body = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (kind) {
    case 0: {
      pb::GraphRegisterRequest q;
      if (!q.ParseFromArray(body, n)) return 0;
      q.set_backend(h.map(q.backend()));
      map_descs(h, q.mutable_tensors());
      pb::Handle g;
      const grpc::Status st = h.core->graph_register(h.meta(), q, &g);
      check(st);
      if (st.ok()) {
        check(h.core->graph_compute(h.meta(), g));
        if (!h.core->graph_free(h.meta(), g).ok()) std::abort();
      }
      break;
    }
    case 1: {
      pb::SupportsOpRequest q;
      if (!q.ParseFromArray(body, n)) return 0;
      q.set_backend(h.map(q.backend()));
      map_descs(h, q.mutable_tensors());
      pb::SupportsOpReply r;
      check(h.core->supports_op(h.meta(), q, &r));
      break;
    }
    case 2: {
      pb::GetTensorRequest q;
      if (!q.ParseFromArray(body, n)) return 0;
      q.set_buffer(h.map(q.buffer()));
      uint64_t got = 0;
      const grpc::Status st = h.core->get_tensor(h.meta(), q, [&](const pb::DataChunk &c) {
        got += c.data().size();
        return true;
      });
      check(st);
      if (st.ok() && got != q.size()) std::abort();  // all bytes, no more
      break;
    }
    case 3: {
      // A stream: the bytes are a sequence of SetTensorChunk messages, each
      // prefixed with a one-byte length.
      srv::set_stream s;
      if (!h.core->set_tensor_begin(h.meta(), &s).ok()) std::abort();
      const uint8_t *p = data + 1, *end = data + size;
      grpc::Status st;
      while (p < end && st.ok()) {
        const size_t want = *p++;
        const size_t len = std::min<size_t>(want, static_cast<size_t>(end - p));
        pb::SetTensorChunk m;
        if (!m.ParseFromArray(p, static_cast<int>(len))) return 0;
        p += len;
        if (m.has_header()) m.mutable_header()->set_buffer(h.map(m.header().buffer()));
        st = h.core->set_tensor_chunk(&s, m);
      }
      check(st);
      if (st.ok()) check(h.core->set_tensor_finish(&s));
      break;
    }
    case 4: {
      pb::CopyBufferRequest q;
      if (!q.ParseFromArray(body, n)) return 0;
      q.set_src_buffer(h.map(q.src_buffer()));
      q.set_dst_buffer(h.map(q.dst_buffer()));
      check(h.core->copy_buffer(h.meta(), q));
      break;
    }
    default: {
      pb::BufferMemsetRequest q;
      if (!q.ParseFromArray(body, n)) return 0;
      q.set_buffer(h.map(q.buffer()));
      check(h.core->buffer_memset(h.meta(), q));
      break;
    }
  }
  return 0;
}
