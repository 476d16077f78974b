// server_test_util.hpp: a service_core on this machine's CPU device, called
// in-process, and helpers to build wire descriptions.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "protocol.hpp"
#include "service_core.hpp"

namespace bp_test {

namespace srv = bp::remote::server;
namespace pb = ::backplane::remote::v1;

inline bp_device *cpu_device() {
  for (size_t i = 0; i < bp_device_count(); ++i) {
    bp_device *d = bp_device_get(i);
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_describe(d, &info) == BP_OK && info.plugin && std::string(bp_plugin_name(info.plugin)) == "cpu") {
      return d;
    }
  }
  return nullptr;
}

inline const char *k_token = "test-token-0123456789";

// One client's view: its metadata strings and the connection it calls on.
struct client {
  std::string token = k_token;
  std::string session;
  std::string peer = "ipv4:127.0.0.1:40000";
  srv::call_meta meta() const {
    srv::call_meta m;
    m.token = &token;
    m.session = session.empty() ? nullptr : &session;
    m.peer = &peer;
    return m;
  }
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_device *cpu = cpu_device();
    ASSERT_NE(cpu, nullptr) << "the cpu plugin was not found";
    srv::service_options o;
    o.token = k_token;
    o.max_memory = 1 << 20;
    o.max_handles = 16;
    o.max_sessions = 3;
    o.devices = {cpu};
    o.server_id = "test";
    core = std::make_unique<srv::service_core>(o);
    c = open();
  }

  client open(const std::string &peer = "ipv4:127.0.0.1:40000") {
    client cl;
    cl.peer = peer;
    pb::HelloRequest q;
    q.set_protocol_version(bp::remote::k_protocol_version);
    q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
    q.set_client_version("test");
    pb::HelloReply r;
    grpc::Status st = core->hello(cl.meta(), q, &r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    cl.session = r.session();
    return cl;
  }

  uint64_t alloc(const client &cl, uint64_t size) {
    pb::BufferAllocRequest q;
    q.set_device(0);
    q.set_size(size);
    pb::BufferAllocReply r;
    grpc::Status st = core->buffer_alloc(cl.meta(), q, &r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return r.id();
  }

  uint64_t backend(const client &cl) {
    pb::BackendOpenRequest q;
    q.set_device(0);
    pb::Handle h;
    grpc::Status st = core->backend_open(cl.meta(), q, &h);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return h.id();
  }

  grpc::Status write(const client &cl, uint64_t buffer, uint64_t offset, const void *data, size_t size) {
    srv::set_stream s;
    if (grpc::Status st = core->set_tensor_begin(cl.meta(), &s); !st.ok()) return st;
    pb::SetTensorChunk m;
    m.mutable_header()->set_buffer(buffer);
    m.mutable_header()->set_offset(offset);
    m.mutable_header()->set_size(size);
    m.set_data(data, size);
    if (grpc::Status st = core->set_tensor_chunk(&s, m); !st.ok()) return st;
    return core->set_tensor_finish(&s);
  }

  grpc::Status read(const client &cl, uint64_t buffer, uint64_t offset, void *data, size_t size, uint64_t chunk = 0) {
    pb::GetTensorRequest q;
    q.set_buffer(buffer);
    q.set_offset(offset);
    q.set_size(size);
    q.set_chunk_bytes(chunk);
    std::string got;
    grpc::Status st = core->get_tensor(cl.meta(), q, [&](const pb::DataChunk &d) {
      got += d.data();
      return true;
    });
    if (st.ok()) {
      EXPECT_EQ(got.size(), size);
      std::memcpy(data, got.data(), std::min(got.size(), size));
    }
    return st;
  }

  std::unique_ptr<srv::service_core> core;
  client c;
};

// A TensorDesc with contiguous strides.
inline pb::TensorDesc desc(bp_type type, std::vector<int64_t> ne, bp_op op = BP_OP_NONE, std::vector<int32_t> src = {},
                           uint64_t buffer = 0, uint64_t offset = 0) {
  pb::TensorDesc d;
  d.set_type(type);
  while (ne.size() < 4) ne.push_back(1);
  uint64_t nb = bp_type_size(type);
  for (int i = 0; i < 4; ++i) {
    d.add_ne(ne[i]);
    d.add_nb(nb);
    nb *= static_cast<uint64_t>(ne[i]);
  }
  d.set_op(op);
  for (int32_t s : src) d.add_src(s);
  d.set_view_src(-1);
  d.set_buffer(buffer);
  d.set_offset(offset);
  return d;
}

#define EXPECT_STATUS(expr, code, ...)                                           \
  do {                                                                           \
    const grpc::Status st_ = (expr);                                             \
    EXPECT_EQ(st_.error_code(), code) << #expr << ": " << st_.error_message();   \
    for (const char *part_ : std::initializer_list<const char *>{__VA_ARGS__}) { \
      EXPECT_NE(st_.error_message().find(part_), std::string::npos)              \
          << "missing '" << part_ << "' in: " << st_.error_message();            \
    }                                                                            \
  } while (0)

}  // namespace bp_test
