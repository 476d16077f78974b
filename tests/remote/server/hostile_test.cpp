// hostile_test.cpp: a hostile client over real gRPC connections against
// an in-process bp-serve (remote/server's server on a loopback port): a
// session id used from another connection, streams that stop sending or
// reading, more streams than a session may hold, a repeated token header.
// Each time, other clients must keep being answered.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "protocol.hpp"
#include "remote.grpc.pb.h"
#include "server.hpp"
#include "server_test_util.hpp"

namespace {

using namespace bp_test;
using grpc::StatusCode;
using namespace std::chrono_literals;

constexpr auto k_idle = 1500ms;  // the stream idle deadline of these servers (long enough for a loaded CI machine)

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    srv::server_config cfg;
    cfg.listen = "127.0.0.1:0";
    cfg.stream_idle = k_idle;
    cfg.service.token = k_token;
    cfg.service.max_sessions = 4;
    cfg.service.max_session_calls = 4;
    cfg.service.devices = {cpu_device()};
    server = std::make_unique<srv::server>(cfg);
    std::string why;
    ASSERT_TRUE(server->start(&why)) << why;
  }
  void TearDown() override { server->stop(0ms); }

  // A client with a connection of its own (no shared subchannel).
  struct conn {
    std::unique_ptr<pb::Remote::Stub> stub;
    std::string session;
    void apply(grpc::ClientContext *c, std::chrono::milliseconds deadline = 10000ms) const {
      c->AddMetadata(bp::remote::k_token_key, k_token);
      if (!session.empty()) c->AddMetadata(bp::remote::k_session_key, session);
      c->set_deadline(std::chrono::system_clock::now() + deadline);
    }
  };

  conn connect(bool with_session = true) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(-1);
    conn c;
    c.stub =
        pb::Remote::NewStub(grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), args));
    if (with_session) {
      pb::HelloRequest q;
      q.set_protocol_version(bp::remote::k_protocol_version);
      q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
      pb::HelloReply r;
      grpc::ClientContext ctx;
      c.apply(&ctx);
      const grpc::Status st = c.stub->Hello(&ctx, q, &r);
      EXPECT_TRUE(st.ok()) << st.error_message();
      c.session = r.session();
    }
    return c;
  }

  uint64_t alloc(const conn &c, uint64_t size) {
    pb::BufferAllocRequest q;
    q.set_size(size);
    pb::BufferAllocReply r;
    grpc::ClientContext ctx;
    c.apply(&ctx);
    const grpc::Status st = c.stub->BufferAlloc(&ctx, q, &r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return r.id();
  }

  grpc::Status memset(const conn &c, uint64_t buffer, uint64_t size) {
    pb::BufferMemsetRequest q;
    q.set_buffer(buffer);
    q.set_size(size);
    q.set_value(7);
    pb::Empty e;
    grpc::ClientContext ctx;
    c.apply(&ctx, 5000ms);
    return c.stub->BufferMemset(&ctx, q, &e);
  }

  std::unique_ptr<srv::server> server;
};

TEST_F(HostileTest, AnotherConnectionCannotUseALiveSessionId) {
  conn victim = connect();
  const uint64_t buf = alloc(victim, 64);
  ASSERT_TRUE(memset(victim, buf, 64).ok());
  // The attacker has the id and the handle, on its own connection.
  conn thief = connect(false);
  thief.session = victim.session;
  pb::GetTensorRequest q;
  q.set_buffer(buf);
  q.set_size(64);
  grpc::ClientContext ctx;
  thief.apply(&ctx);
  auto reader = thief.stub->GetTensor(&ctx, q);
  pb::DataChunk d;
  EXPECT_FALSE(reader->Read(&d));
  const grpc::Status stolen = reader->Finish();
  EXPECT_EQ(stolen.error_code(), StatusCode::NOT_FOUND);
  // A never-opened id reads the same.
  conn nobody = connect(false);
  nobody.session = std::string(32, 'a');
  const grpc::Status unknown = memset(nobody, buf, 64);
  EXPECT_EQ(unknown.error_code(), stolen.error_code());
  EXPECT_EQ(unknown.error_message(), stolen.error_message());
  EXPECT_TRUE(memset(victim, buf, 64).ok());
}

TEST_F(HostileTest, ARepeatedTokenHeaderIsRefused) {
  conn c = connect();
  pb::DeviceRef q;
  pb::DeviceMemoryReply r;
  grpc::ClientContext ctx;
  c.apply(&ctx);
  ctx.AddMetadata(bp::remote::k_token_key, "anything");
  EXPECT_EQ(c.stub->DeviceMemory(&ctx, q, &r).error_code(), StatusCode::UNAUTHENTICATED);
}

TEST_F(HostileTest, StuckWritersAreEndedAndNeverLockOthersOut) {
  conn bad = connect();
  const uint64_t buf = alloc(bad, 1 << 16);
  // Streams that send a header and then nothing, past the session's limit.
  struct stuck {
    grpc::ClientContext ctx;
    pb::Empty reply;
    std::unique_ptr<grpc::ClientWriter<pb::SetTensorChunk>> writer;
  };
  std::vector<std::unique_ptr<stuck>> streams;
  for (int i = 0; i < 12; ++i) {
    auto s = std::make_unique<stuck>();
    bad.apply(&s->ctx);
    s->writer = bad.stub->SetTensor(&s->ctx, &s->reply);
    pb::SetTensorChunk m;
    m.mutable_header()->set_buffer(buf);
    m.mutable_header()->set_size(1 << 16);
    s->writer->Write(m);
    streams.push_back(std::move(s));
  }
  std::this_thread::sleep_for(100ms);
  // Everyone else is still answered, established sessions and new ones.
  conn good = connect();
  const uint64_t mine = alloc(good, 128);
  EXPECT_TRUE(memset(good, mine, 128).ok());
  conn late = connect();
  EXPECT_FALSE(late.session.empty());
  // The streams past the limit were refused at once; the others end at the
  // idle deadline. Nothing waits longer than that.
  const auto t0 = std::chrono::steady_clock::now();
  int refused = 0, idle = 0;
  for (auto &s : streams) {
    const grpc::Status st = s->writer->Finish();
    if (st.error_code() == StatusCode::RESOURCE_EXHAUSTED) ++refused;
    // Ended by the server: gRPC's synchronous API can only cancel a stream
    // blocked in Read, which the client sees as CANCELLED.
    if (st.error_code() == StatusCode::CANCELLED) ++idle;
  }
  EXPECT_EQ(refused, 8);
  EXPECT_EQ(idle, 4);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  // The session works again once its streams are gone: the client hears of
  // a cancel before the server's handler has returned and let go of its
  // slot, so this may take a moment.
  grpc::Status again = memset(bad, buf, 16);
  for (int i = 0; i < 100 && again.error_code() == StatusCode::RESOURCE_EXHAUSTED; ++i) {
    std::this_thread::sleep_for(20ms);
    again = memset(bad, buf, 16);
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
}

TEST_F(HostileTest, AReaderThatStopsHoldsNoLockAndIsEnded) {
  conn c = connect();
  const uint64_t size = 16 << 20;  // far past what the connection's windows buffer
  pb::BufferAllocRequest aq;
  aq.set_size(size);
  pb::BufferAllocReply ar;
  {
    grpc::ClientContext ctx;
    c.apply(&ctx);
    ASSERT_TRUE(c.stub->BufferAlloc(&ctx, aq, &ar).ok());
  }
  pb::GetTensorRequest q;
  q.set_buffer(ar.id());
  q.set_size(size);
  grpc::ClientContext ctx;
  c.apply(&ctx, 20000ms);
  auto reader = c.stub->GetTensor(&ctx, q);  // and never read
  std::this_thread::sleep_for(200ms);
  // The same session's other calls go on while the stream is stuck.
  const uint64_t small = alloc(c, 64);
  EXPECT_TRUE(memset(c, small, 64).ok());
  // The server ends the stream at its idle deadline.
  std::this_thread::sleep_for(k_idle + 600ms);
  pb::DataChunk d;
  while (reader->Read(&d)) {
  }
  const grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), StatusCode::CANCELLED) << st.error_message();
  EXPECT_TRUE(memset(c, small, 64).ok());
}

}  // namespace
