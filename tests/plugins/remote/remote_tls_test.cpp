// TLS between the remote plugin and bp-serve: a client with the server's CA
// works; a plaintext client to a TLS server, or a TLS client to a plaintext
// server, fails within the connect deadline with a message about TLS. The
// certificates are made here with the openssl command (skipped without it).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "remote_harness.hpp"
#include "support/find.hpp"

namespace {

using bp_test::reload_remote;
using bp_test::serve_cpu;
using bp_test::serve_process;
using clock_type = std::chrono::steady_clock;

struct RemoteTls : ::testing::Test {
  std::string dir;
  void SetUp() override {
    BP_REQUIRE_SERVE();
    if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl command";
    char tmpl[] = "/tmp/bp-remote-tls.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    const std::string script =
        "cd " + dir +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=bp-test-ca"
        " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost"
        " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext"
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2"
        " -extfile san.ext";
    ASSERT_EQ(std::system((script + " > openssl.log 2>&1").c_str()), 0) << "openssl failed in " << dir;
    unsetenv("BP_REMOTE_TOKEN_FILE");
    unsetenv("BP_REMOTE_TIMEOUT_MS");
    unsetenv("BP_REMOTE_TLS_CA");
  }
  void TearDown() override {
    if (bp_plugin *p = bp_test::find_plugin("remote")) bp_plugin_unload(p);
    unsetenv("BP_REMOTE_TLS_CA");
    if (!dir.empty()) std::system(("rm -rf " + dir).c_str());
  }
  // Loads the plugin against |address| and returns the enumeration status;
  // |why| gets the message and |ms| the time it took.
  bp_status enumerate(const std::string &address, std::string *why, double *ms) {
    setenv("BP_REMOTE", address.c_str(), 1);
    bp_plugin *p = reload_remote();
    const char *msg = nullptr;
    const auto t0 = clock_type::now();
    const bp_status st = bp_plugin_status(p, &msg);
    *ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    *why = msg ? msg : "";
    return st;
  }
};

TEST_F(RemoteTls, AClientWithTheServersCaWorks) {
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu({"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"})))
      << server.log();
  setenv("BP_REMOTE_TLS_CA", (dir + "/ca.pem").c_str(), 1);
  std::string why;
  double ms = 0;
  ASSERT_EQ(enumerate(server.address(), &why, &ms), BP_OK) << why;
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
}

TEST_F(RemoteTls, APlaintextClientToATlsServerFailsFastNamingTls) {
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu({"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"})))
      << server.log();
  std::string why;
  double ms = 0;
  EXPECT_EQ(enumerate(server.address(), &why, &ms), BP_ERR_UNAVAILABLE);
  EXPECT_LT(ms, 3500.0);
  EXPECT_NE(why.find("BP_REMOTE_TLS_CA"), std::string::npos) << why;
  EXPECT_NE(why.find("not set: plaintext"), std::string::npos) << why;
}

TEST_F(RemoteTls, ATlsClientToAPlaintextServerFailsFastNamingTls) {
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu())) << server.log();
  setenv("BP_REMOTE_TLS_CA", (dir + "/ca.pem").c_str(), 1);
  std::string why;
  double ms = 0;
  EXPECT_EQ(enumerate(server.address(), &why, &ms), BP_ERR_UNAVAILABLE);
  EXPECT_LT(ms, 3500.0);
  EXPECT_NE(why.find("set: TLS"), std::string::npos) << why;
}

}  // namespace
