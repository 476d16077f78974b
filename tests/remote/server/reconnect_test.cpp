// reconnect_test.cpp: a session belongs to the transport connection that
// opened it. A client whose connection was reset is followed by another
// connection from the same address and port (raw_h2.hpp binds the port);
// the newcomer, even with the session id, is refused and the session lives
// on until its grace ends. Against an in-process bp-serve on loopback.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "protocol.hpp"
#include "raw_h2.hpp"
#include "server.hpp"
#include "server_test_util.hpp"

namespace {

using namespace bp_test;
using namespace std::chrono_literals;

const std::string k_hello = "/backplane.remote.v1.Remote/Hello";
const std::string k_goodbye = "/backplane.remote.v1.Remote/Goodbye";

class ReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    srv::server_config cfg;
    cfg.listen = "127.0.0.1:0";
    cfg.service.token = k_token;
    cfg.service.max_sessions = 4;
    cfg.service.devices = {cpu_device()};
    server = std::make_unique<srv::server>(cfg);
    std::string why;
    ASSERT_TRUE(server->start(&why)) << why;
    port = static_cast<uint16_t>(std::stoi(server->address().substr(server->address().rfind(':') + 1)));
  }
  void TearDown() override { server->stop(0ms); }

  // Hello on |c|; the session id, or "" when refused.
  std::string hello(raw_h2 &c) {
    pb::HelloRequest q;
    q.set_protocol_version(bp::remote::k_protocol_version);
    q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
    std::string reply;
    if (!c.call(k_hello, {{bp::remote::k_token_key, k_token}}, q.SerializeAsString(), &reply)) return "";
    pb::HelloReply r;
    return r.ParseFromString(reply) ? r.session() : "";
  }
  // Goodbye for |session| on |c|: true when the server accepted it.
  bool goodbye(raw_h2 &c, const std::string &session) {
    std::string reply;
    return c.call(k_goodbye, {{bp::remote::k_token_key, k_token}, {bp::remote::k_session_key, session}},
                  pb::GoodbyeRequest().SerializeAsString(), &reply);
  }

  std::unique_ptr<srv::server> server;
  uint16_t port = 0;
};

// The raw client itself: Hello then Goodbye on one connection is accepted.
TEST_F(ReconnectTest, TheSameConnectionClosesItsSession) {
  raw_h2 c;
  ASSERT_TRUE(c.connect(port));
  const std::string id = hello(c);
  ASSERT_EQ(id.size(), 32u);
  EXPECT_EQ(server->core().session_count(), 1u);
  EXPECT_TRUE(goodbye(c, id));
  EXPECT_EQ(server->core().session_count(), 0u);
}

TEST_F(ReconnectTest, ANewConnectionFromTheSamePortIsAnotherConnection) {
  raw_h2 victim;
  ASSERT_TRUE(victim.connect(port));
  const uint16_t local = victim.local_port();
  const std::string id = hello(victim);
  ASSERT_EQ(id.size(), 32u);
  // Reset before any lifeline: the session waits out its grace.
  victim.reset();
  // Same address, same port, the session id in hand. The server may not
  // have let go of the old socket yet: retry the bind for a moment.
  raw_h2 attacker;
  bool connected = false;
  for (int i = 0; i < 50 && !(connected = attacker.connect(port, local)); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(connected) << "could not connect again from port " << local;
  ASSERT_EQ(attacker.local_port(), local);
  EXPECT_FALSE(goodbye(attacker, id)) << "a new connection from the old port closed the session";
  EXPECT_EQ(server->core().session_count(), 1u);
  // The newcomer's own Hello is a session of its own.
  const std::string own = hello(attacker);
  ASSERT_EQ(own.size(), 32u);
  EXPECT_NE(own, id);
  EXPECT_EQ(server->core().session_count(), 2u);
}

}  // namespace
