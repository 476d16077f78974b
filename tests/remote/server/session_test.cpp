// session_test.cpp: the token, Hello's version checks, sessions and their
// handles, quotas, lifelines and reaping, through the service core.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "server_test_util.hpp"
#include "token.hpp"

namespace {

using namespace bp_test;
using grpc::StatusCode;

TEST(Token, ConstantTimeEqualComparesEveryByte) {
  EXPECT_TRUE(srv::constant_time_equal("", ""));
  EXPECT_TRUE(srv::constant_time_equal("secret-token", "secret-token"));
  EXPECT_FALSE(srv::constant_time_equal("secret-token", "Secret-token"));  // first byte
  EXPECT_FALSE(srv::constant_time_equal("secret-token", "secret-tokeN"));  // last byte
  EXPECT_FALSE(srv::constant_time_equal("secret-token", "secret-toke"));   // a prefix
  EXPECT_FALSE(srv::constant_time_equal("secret-toke", "secret-token"));
  EXPECT_FALSE(srv::constant_time_equal("", "x"));
  EXPECT_FALSE(srv::constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(Token, FileIsTrimmedAndEmptyOrMultiLineFilesAreRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("bp_token_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char *name, const std::string &text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  std::string token, why;
  ASSERT_TRUE(srv::read_token_file(write("ok", "  s3cret-value\n"), &token, &why)) << why;
  EXPECT_EQ(token, "s3cret-value");
  EXPECT_FALSE(srv::read_token_file(write("empty", " \n\t"), &token, &why));
  EXPECT_NE(why.find("empty"), std::string::npos) << why;
  EXPECT_FALSE(srv::read_token_file(write("two", "a\nb\n"), &token, &why));
  EXPECT_NE(why.find("more than one line"), std::string::npos) << why;
  EXPECT_FALSE(srv::read_token_file((dir / "missing").string(), &token, &why));
  EXPECT_NE(why.find("cannot read"), std::string::npos) << why;
  std::filesystem::remove_all(dir);
}

TEST_F(ServerTest, HelloListsTheDevicesAndQuotas) {
  pb::HelloRequest q;
  q.set_protocol_version(bp::remote::k_protocol_version);
  q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
  pb::HelloReply r;
  client cl;
  ASSERT_TRUE(core->hello(cl.meta(), q, &r).ok());
  EXPECT_EQ(r.session().size(), 32u);
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).index(), 0u);
  EXPECT_EQ(r.devices(0).type(), static_cast<uint32_t>(BP_DEVICE_TYPE_CPU));
  EXPECT_GT(r.devices(0).buffer_alignment(), 0u);
  EXPECT_EQ(r.devices(0).caps() & BP_DEVICE_CAP_HOST_MEMORY, 0u);  // not across the network
  EXPECT_EQ(r.session_memory_quota(), 1u << 20);
  EXPECT_EQ(r.session_handle_quota(), 16u);
  EXPECT_EQ(r.session_call_quota(), 8u);
  EXPECT_EQ(r.session_thread_quota(), std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(r.session_graph_memory_quota(), uint64_t{256} << 20);
  EXPECT_EQ(r.op_table_fingerprint(), bp::remote::op_table_fingerprint());
  EXPECT_EQ(r.max_message_bytes(), bp::remote::k_max_message_bytes);
}

TEST_F(ServerTest, VersionOrOpTableMismatchIsFailedPrecondition) {
  pb::HelloRequest q;
  q.set_protocol_version(bp::remote::k_protocol_version + 1);
  q.set_client_version("9.9.9");
  q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
  pb::HelloReply r;
  client cl;
  const std::string theirs = "protocol " + std::to_string(bp::remote::k_protocol_version + 1);
  const std::string ours_v = "protocol " + std::to_string(bp::remote::k_protocol_version);
  EXPECT_STATUS(core->hello(cl.meta(), q, &r), StatusCode::FAILED_PRECONDITION, theirs.c_str(), ours_v.c_str(), "9.9.9",
                bp_version_string());
  q.set_protocol_version(bp::remote::k_protocol_version);
  q.set_op_table_fingerprint("fnv1a64:0000000000000000");
  const std::string ours = bp::remote::op_table_fingerprint();
  EXPECT_STATUS(core->hello(cl.meta(), q, &r), StatusCode::FAILED_PRECONDITION, "fnv1a64:0000000000000000",
                ours.c_str());
  EXPECT_EQ(core->session_count(), 1u);  // only the fixture's
}

TEST_F(ServerTest, EveryCallNeedsTheToken) {
  uint64_t buf = alloc(c, 64);
  const std::string wrong[] = {"wrong", std::string(k_token) + "x", std::string(k_token).substr(1), ""};
  std::vector<const std::string *> bad_tokens = {nullptr};
  for (const std::string &w : wrong) bad_tokens.push_back(&w);
  for (const std::string *bad : bad_tokens) {
    srv::call_meta m = c.meta();
    m.token = bad;
    pb::Handle h;
    h.set_id(buf);
    pb::Empty e;
    pb::HelloReply hr;
    pb::BufferAllocReply ar;
    pb::Handle out;
    pb::SupportsOpReply so;
    pb::DeviceMemoryReply dm;
    srv::set_stream ss;
    const std::vector<std::function<grpc::Status()>> calls = {
        [&] { return core->hello(m, pb::HelloRequest(), &hr); },
        [&] {
          std::shared_ptr<srv::session> s;
          return core->lifeline_attach(m, &s);
        },
        [&] { return core->goodbye(m); },
        [&] { return core->device_memory(m, pb::DeviceRef(), &dm); },
        [&] { return core->backend_open(m, pb::BackendOpenRequest(), &out); },
        [&] { return core->backend_free(m, h); },
        [&] { return core->backend_synchronize(m, h); },
        [&] { return core->supports_op(m, pb::SupportsOpRequest(), &so); },
        [&] { return core->buffer_alloc(m, pb::BufferAllocRequest(), &ar); },
        [&] { return core->buffer_free(m, h); },
        [&] { return core->buffer_clear(m, pb::BufferClearRequest()); },
        [&] { return core->buffer_memset(m, pb::BufferMemsetRequest()); },
        [&] { return core->set_tensor_begin(m, &ss); },
        [&] { return core->get_tensor(m, pb::GetTensorRequest(), [](const pb::DataChunk &) { return true; }); },
        [&] { return core->copy_buffer(m, pb::CopyBufferRequest()); },
        [&] { return core->graph_register(m, pb::GraphRegisterRequest(), &out); },
        [&] { return core->graph_compute(m, h); },
        [&] { return core->graph_free(m, h); },
    };
    for (size_t i = 0; i < calls.size(); ++i) {
      const grpc::Status st = calls[i]();
      EXPECT_EQ(st.error_code(), StatusCode::UNAUTHENTICATED) << "call " << i << ": " << st.error_message();
      EXPECT_EQ(st.error_message().find(k_token), std::string::npos) << "the token leaked into a message";
    }
  }
  // Nothing was freed or closed by the refused calls.
  uint8_t x = 0;
  EXPECT_TRUE(read(c, buf, 0, &x, 1).ok());
}

TEST_F(ServerTest, MaxClientsCapsSessions) {
  client b = open(), d = open();  // 3 with the fixture's
  pb::HelloRequest q;
  q.set_protocol_version(bp::remote::k_protocol_version);
  q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
  pb::HelloReply r;
  client e;
  EXPECT_STATUS(core->hello(e.meta(), q, &r), StatusCode::RESOURCE_EXHAUSTED, "--max-clients");
  ASSERT_TRUE(core->goodbye(d.meta()).ok());
  EXPECT_TRUE(core->hello(e.meta(), q, &r).ok());
}

TEST_F(ServerTest, HandlesAreSessionScopedAndDieWithTheirSession) {
  client other = open();
  const uint64_t buf = alloc(c, 64);
  const uint64_t be = backend(c);
  pb::Handle h;
  h.set_id(buf);
  uint8_t x = 0;
  // Another session's handle, a freed one, a made-up one: NOT_FOUND.
  EXPECT_STATUS(read(other, buf, 0, &x, 1), StatusCode::NOT_FOUND, "unknown in this session");
  EXPECT_STATUS(core->buffer_free(other.meta(), h), StatusCode::NOT_FOUND);
  pb::Handle hb;
  hb.set_id(be);
  EXPECT_STATUS(core->backend_synchronize(other.meta(), hb), StatusCode::NOT_FOUND);
  ASSERT_TRUE(core->buffer_free(c.meta(), h).ok());
  EXPECT_STATUS(core->buffer_free(c.meta(), h), StatusCode::NOT_FOUND);
  EXPECT_STATUS(read(c, buf, 0, &x, 1), StatusCode::NOT_FOUND);
  h.set_id(12345);
  EXPECT_STATUS(core->graph_compute(c.meta(), h), StatusCode::NOT_FOUND);
  // Sessions: unknown, malformed, closed.
  client ghost = c;
  ghost.session = std::string(32, '1');
  EXPECT_STATUS(core->backend_synchronize(ghost.meta(), hb), StatusCode::NOT_FOUND, "Hello again");
  ghost.session = "12x";
  EXPECT_STATUS(core->backend_synchronize(ghost.meta(), hb), StatusCode::INVALID_ARGUMENT, "bp-session");
  ghost.session = c.session;
  ghost.session[0] = 'G';
  EXPECT_STATUS(core->backend_synchronize(ghost.meta(), hb), StatusCode::INVALID_ARGUMENT, "bp-session");
  ASSERT_TRUE(core->goodbye(c.meta()).ok());
  EXPECT_STATUS(core->backend_synchronize(c.meta(), hb), StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, MemoryAndHandleQuotas) {
  pb::BufferAllocRequest q;
  q.set_device(0);
  q.set_size((1 << 20) + 1);
  pb::BufferAllocReply r;
  EXPECT_STATUS(core->buffer_alloc(c.meta(), q, &r), StatusCode::RESOURCE_EXHAUSTED, "--max-memory");
  q.set_size(UINT64_MAX);
  EXPECT_STATUS(core->buffer_alloc(c.meta(), q, &r), StatusCode::INVALID_ARGUMENT);
  const uint64_t big = alloc(c, 1 << 19);
  alloc(c, 1 << 19);
  q.set_size(2);
  EXPECT_STATUS(core->buffer_alloc(c.meta(), q, &r), StatusCode::RESOURCE_EXHAUSTED, "quota");
  pb::Handle h;
  h.set_id(big);
  ASSERT_TRUE(core->buffer_free(c.meta(), h).ok());
  EXPECT_TRUE(core->buffer_alloc(c.meta(), q, &r).ok());  // freed memory counts no more
  // Handles: 16 per session.
  client d = open();
  for (int i = 0; i < 16; ++i) alloc(d, 2);
  EXPECT_STATUS(core->buffer_alloc(d.meta(), q, &r), StatusCode::RESOURCE_EXHAUSTED, "handles");
  pb::BackendOpenRequest bq;
  pb::Handle out;
  EXPECT_STATUS(core->backend_open(d.meta(), bq, &out), StatusCode::RESOURCE_EXHAUSTED, "handles");
  q.set_device(7);
  EXPECT_STATUS(core->buffer_alloc(c.meta(), q, &r), StatusCode::INVALID_ARGUMENT, "device 7");
}

TEST_F(ServerTest, BackendParamsAreCheckedBeforeTheSpecIsMade) {
  pb::BackendOpenRequest q;
  q.set_device(0);
  pb::Param *p = q.add_params();
  p->set_key("threads");
  p->set_value("1,evil=2");
  pb::Handle h;
  EXPECT_STATUS(core->backend_open(c.meta(), q, &h), StatusCode::INVALID_ARGUMENT, "not allowed");
  p->set_key("Threads");
  p->set_value("1");
  EXPECT_STATUS(core->backend_open(c.meta(), q, &h), StatusCode::INVALID_ARGUMENT, "a-z");
  p->set_key("threads");
  ASSERT_TRUE(core->backend_open(c.meta(), q, &h).ok());
  p->set_key("no_such_param");
  EXPECT_STATUS(core->backend_open(c.meta(), q, &h), StatusCode::INVALID_ARGUMENT, "no_such_param");
}

TEST_F(ServerTest, LifelineEndFreesTheSessionAndReapingClosesSessionsWithoutOne) {
  std::shared_ptr<srv::session> s;
  ASSERT_TRUE(core->lifeline_attach(c.meta(), &s).ok());
  std::shared_ptr<srv::session> again;
  EXPECT_STATUS(core->lifeline_attach(c.meta(), &again), StatusCode::FAILED_PRECONDITION, "already");
  alloc(c, 256);
  // With a lifeline, reaping leaves it alone; without, it goes.
  client loose = open();
  EXPECT_EQ(core->reap(std::chrono::seconds(0)), 1u);
  pb::BufferAllocRequest q;
  q.set_device(0);
  q.set_size(2);
  pb::BufferAllocReply r;
  EXPECT_STATUS(core->buffer_alloc(loose.meta(), q, &r), StatusCode::NOT_FOUND);
  EXPECT_TRUE(core->buffer_alloc(c.meta(), q, &r).ok());
  // The lifeline waits until the session closes.
  EXPECT_TRUE(core->lifeline_wait(*s, std::chrono::milliseconds(1)));
  core->lifeline_end(s);
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->buffers.empty());
  EXPECT_EQ(s->memory_used, 0u);
  EXPECT_FALSE(core->lifeline_wait(*s, std::chrono::milliseconds(1)));
  EXPECT_STATUS(core->buffer_alloc(c.meta(), q, &r), StatusCode::NOT_FOUND);
  EXPECT_EQ(core->session_count(), 0u);
}

TEST_F(ServerTest, ShutdownRefusesNewCalls) {
  core->begin_shutdown();
  pb::HelloRequest q;
  pb::HelloReply r;
  EXPECT_STATUS(core->hello(c.meta(), q, &r), StatusCode::UNAVAILABLE);
  pb::Handle h;
  EXPECT_STATUS(core->graph_compute(c.meta(), h), StatusCode::UNAVAILABLE);
}

}  // namespace
