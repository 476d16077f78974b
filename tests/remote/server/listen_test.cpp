// listen_test.cpp: the --listen address rules: HOST:PORT parsing and which
// hosts count as loopback (the only ones served without token and TLS):
// those whose every resolved address is loopback.
#include <gtest/gtest.h>

#include "server.hpp"

namespace {

namespace srv = bp::remote::server;

TEST(Listen, SplitsHostAndPort) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(srv::split_host_port("127.0.0.1:0", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(srv::split_host_port("[::1]:7000", &host, &port));
  EXPECT_EQ(host, "[::1]");
  EXPECT_EQ(port, 7000);
  ASSERT_TRUE(srv::split_host_port("example.org:65535", &host, &port));
  for (const char *bad : {"", "7000", ":7000", "host:", "host:65536", "host:12a", "::1:7000", "host:-1", "h:123456"}) {
    EXPECT_FALSE(srv::split_host_port(bad, &host, &port)) << bad;
  }
}

TEST(Listen, LoopbackHosts) {
  for (const char *h : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"})
    EXPECT_TRUE(srv::is_loopback_host(h)) << h;
  // Resolved, not matched as text: a DNS name that starts like a loopback
  // address is a name like any other (and one that does not resolve is not
  // loopback).
  for (const char *h : {"0.0.0.0", "10.0.0.1", "[::]", "::", "example.org", "128.0.0.1", "localhost.evil.org",
                        "127.attacker.example", "127.0.0.1.nip.io.invalid", "", "[]", "[127.0.0.1]x"}) {
    EXPECT_FALSE(srv::is_loopback_host(h)) << h;
  }
}

}  // namespace
