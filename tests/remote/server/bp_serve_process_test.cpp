// bp_serve_process_test.cpp: the real bp-serve binary, started on port 0,
// reached with a raw gRPC stub: the token, the device list, refusing a
// non-loopback address without protection, a clean stop on SIGTERM (the
// lifeline ends with UNAVAILABLE), and TLS (a test CA made with openssl).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "protocol.hpp"
#include "remote.grpc.pb.h"
#include "service_core.hpp"  // op_table_fingerprint

extern char **environ;

namespace {

namespace pb = ::backplane::remote::v1;
namespace fs = std::filesystem;

const std::string k_bin = std::string(BP_TEST_BIN_DIR) + "/bp-serve";

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A temporary folder, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("bp_serve_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string file(const std::string &name, const std::string &text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

// bp-serve running as a child; its stdout read until the listening line.
class serve_process {
 public:
  explicit serve_process(std::vector<std::string> args) {
    args.insert(args.begin(), k_bin);
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    if (posix_spawn(&pid_, k_bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    fd_ = out[0];
  }
  ~serve_process() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  // The address from "bp-serve: listening on HOST:PORT", or "" when the
  // process wrote no such line within |timeout|.
  std::string address(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::string text;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      const std::string tag = "bp-serve: listening on ";
      const size_t at = text.find(tag);
      const size_t nl = at == std::string::npos ? at : text.find('\n', at);
      if (nl != std::string::npos) return text.substr(at + tag.size(), nl - at - tag.size());
    }
    return "";
  }
  // The exit status, waiting up to |timeout|; -1 if it did not exit.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(20000);
    }
    return -1;
  }
  void signal(int sig) { kill(pid_, sig); }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
};

pb::HelloRequest hello_request() {
  pb::HelloRequest q;
  q.set_protocol_version(bp::remote::k_protocol_version);
  q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
  q.set_client_version("test");
  return q;
}

grpc::Status hello(pb::Remote::Stub &stub, const std::string *token, pb::HelloReply *r) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (token) ctx.AddMetadata(bp::remote::k_token_key, *token);
  return stub.Hello(&ctx, hello_request(), r);
}

TEST(BpServeProcess, TokenDevicesAndCleanStop) {
  temp_dir dir;
  const std::string token = "process-test-token-42";
  const std::string token_file = dir.file("token", token + "\n");
  serve_process p({"--listen", "127.0.0.1:0", "--token-file", token_file, "--devices", "cpu"});
  ASSERT_TRUE(p.started());
  const std::string addr = p.address();
  ASSERT_FALSE(addr.empty()) << "bp-serve printed no listening line";
  auto stub = pb::Remote::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));

  pb::HelloReply r;
  const std::string wrong = "process-test-token-43";
  EXPECT_EQ(hello(*stub, nullptr, &r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(hello(*stub, &wrong, &r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status st = hello(*stub, &token, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).type(), static_cast<uint32_t>(BP_DEVICE_TYPE_CPU));
  EXPECT_EQ(r.session().size(), 32u);

  // A lifeline: heartbeats until the server stops, then UNAVAILABLE.
  grpc::ClientContext lctx;
  lctx.AddMetadata(bp::remote::k_token_key, token);
  lctx.AddMetadata(bp::remote::k_session_key, r.session());
  auto reader = stub->Lifeline(&lctx, pb::LifelineRequest());
  pb::Heartbeat hb;
  ASSERT_TRUE(reader->Read(&hb));
  p.signal(SIGTERM);
  while (reader->Read(&hb)) {
  }
  st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(10)), 0);
}

// Calls with the session's metadata.
struct session_ctx {
  std::string id;
  void apply(grpc::ClientContext *c) const {
    c->AddMetadata(bp::remote::k_session_key, id);
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }
};

TEST(BpServeProcess, StreamsBytesInChunksAndACancelledLifelineEndsTheSession) {
  serve_process p({"--listen", "127.0.0.1:0", "--devices", "cpu"});
  const std::string addr = p.address();
  ASSERT_FALSE(addr.empty());
  auto stub = pb::Remote::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  pb::HelloReply hr;
  ASSERT_TRUE(hello(*stub, nullptr, &hr).ok());
  const session_ctx s{hr.session()};
  auto lctx = std::make_unique<grpc::ClientContext>();
  lctx->AddMetadata(bp::remote::k_session_key, s.id);
  auto lifeline = stub->Lifeline(lctx.get(), pb::LifelineRequest());
  pb::Heartbeat hb;
  ASSERT_TRUE(lifeline->Read(&hb));

  const size_t n = (size_t{3} << 20) + 5;  // three full chunks and a bit
  pb::BufferAllocRequest aq;
  aq.set_size(n);
  pb::BufferAllocReply ar;
  {
    grpc::ClientContext c;
    s.apply(&c);
    ASSERT_TRUE(stub->BufferAlloc(&c, aq, &ar).ok());
  }
  std::string data(n, '\0');
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>((i * 131) >> 3);
  {
    grpc::ClientContext c;
    s.apply(&c);
    pb::Empty e;
    auto w = stub->SetTensor(&c, &e);
    for (size_t at = 0; at < n; at += bp::remote::k_default_chunk_bytes) {
      pb::SetTensorChunk m;
      if (at == 0) {
        m.mutable_header()->set_buffer(ar.id());
        m.mutable_header()->set_size(n);
      }
      m.set_data(data.substr(at, bp::remote::k_default_chunk_bytes));
      ASSERT_TRUE(w->Write(m));
    }
    w->WritesDone();
    grpc::Status st = w->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  {
    grpc::ClientContext c;
    s.apply(&c);
    pb::GetTensorRequest q;
    q.set_buffer(ar.id());
    q.set_size(n);
    auto r = stub->GetTensor(&c, q);
    std::string got;
    pb::DataChunk chunk;
    int chunks = 0;
    while (r->Read(&chunk)) {
      EXPECT_LE(chunk.data().size(), bp::remote::k_default_chunk_bytes);
      got += chunk.data();
      ++chunks;
    }
    ASSERT_TRUE(r->Finish().ok());
    EXPECT_EQ(chunks, 4);
    EXPECT_TRUE(got == data) << "the bytes read back differ";
  }
  {
    // One message above the server's limit is refused by gRPC itself.
    grpc::ClientContext c;
    s.apply(&c);
    pb::Empty e;
    auto w = stub->SetTensor(&c, &e);
    pb::SetTensorChunk m;
    m.mutable_header()->set_buffer(ar.id());
    m.mutable_header()->set_size(bp::remote::k_max_message_bytes + 1);
    m.set_data(std::string(bp::remote::k_max_message_bytes + 1, 'x'));
    w->Write(m);
    w->WritesDone();
    EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // The client goes away: the session and its buffer are freed.
  lctx->TryCancel();
  grpc::StatusCode code = grpc::StatusCode::OK;
  for (int i = 0; i < 100 && code != grpc::StatusCode::NOT_FOUND; ++i) {
    usleep(50000);
    grpc::ClientContext c;
    s.apply(&c);
    pb::Handle h;
    h.set_id(ar.id());
    pb::Empty e;
    code = stub->BackendSynchronize(&c, h, &e).error_code();
  }
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND) << "the session outlived its lifeline";
  lifeline->Finish();
}

TEST(BpServeProcess, RefusesAnOpenAddressWithoutTokenAndTls) {
  serve_process p({"--listen", "0.0.0.0:0"});
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(10)), 2);
}

// A self-signed CA and a server certificate for 127.0.0.1 signed by it,
// and a client certificate, made with the openssl command.
struct test_pki {
  temp_dir dir;
  bool ok = false;
  std::string ca, server_cert, server_key, client_cert, client_key;
  test_pki() {
    const std::string d = dir.path.string();
    const std::string cmd =
        "cd '" + d + "' && (" +
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=bp-test-ca && "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 && "
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 "
        "-extfile san.ext && "
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=bp-test-client && "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1"
        ") >/dev/null 2>&1";
    ok = std::system(cmd.c_str()) == 0;
    if (!ok) return;
    ca = slurp(dir.path / "ca.pem");
    server_cert = (dir.path / "server.pem").string();
    server_key = (dir.path / "server.key").string();
    client_cert = slurp(dir.path / "client.pem");
    client_key = slurp(dir.path / "client.key");
  }
};

std::unique_ptr<pb::Remote::Stub> tls_stub(const std::string &addr, const std::string &ca, const std::string &cert = "",
                                           const std::string &key = "") {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca;
  o.pem_cert_chain = cert;
  o.pem_private_key = key;
  return pb::Remote::NewStub(grpc::CreateChannel(addr, grpc::SslCredentials(o)));
}

TEST(BpServeProcess, TlsAndMismatchedTransportsFailFast) {
  if (std::system("openssl version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl command";
  test_pki pki;
  ASSERT_TRUE(pki.ok) << "openssl could not make the test certificates";
  serve_process tls(
      {"--listen", "127.0.0.1:0", "--devices", "cpu", "--tls-cert", pki.server_cert, "--tls-key", pki.server_key});
  const std::string addr = tls.address();
  ASSERT_FALSE(addr.empty());
  pb::HelloReply r;
  grpc::Status st = hello(*tls_stub(addr, pki.ca), nullptr, &r);
  EXPECT_TRUE(st.ok()) << st.error_message();

  // Plaintext to a TLS server: refused well before the 10 s deadline.
  const auto t0 = std::chrono::steady_clock::now();
  auto plain = pb::Remote::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  st = hello(*plain, nullptr, &r);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));

  // TLS to a plaintext server: the same.
  serve_process plain_server({"--listen", "127.0.0.1:0", "--devices", "cpu"});
  const std::string plain_addr = plain_server.address();
  ASSERT_FALSE(plain_addr.empty());
  const auto t1 = std::chrono::steady_clock::now();
  st = hello(*tls_stub(plain_addr, pki.ca), nullptr, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(5));
}

TEST(BpServeProcess, ClientCertificateRequiredWithTlsClientCa) {
  if (std::system("openssl version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl command";
  test_pki pki;
  ASSERT_TRUE(pki.ok) << "openssl could not make the test certificates";
  const std::string ca_file = (pki.dir.path / "ca.pem").string();
  serve_process p({"--listen", "127.0.0.1:0", "--devices", "cpu", "--tls-cert", pki.server_cert, "--tls-key",
                   pki.server_key, "--tls-client-ca", ca_file});
  const std::string addr = p.address();
  ASSERT_FALSE(addr.empty());
  pb::HelloReply r;
  EXPECT_FALSE(hello(*tls_stub(addr, pki.ca), nullptr, &r).ok());  // no client certificate
  grpc::Status st = hello(*tls_stub(addr, pki.ca, pki.client_cert, pki.client_key), nullptr, &r);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

}  // namespace
