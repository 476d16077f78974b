// security_test.cpp: what a hostile client must not get from the service
// core: another connection's session, another session's freed bytes, more
// calls, threads or graph memory than its quotas, a server thread after it
// gave up, a forged log line; and a closed session's memory back to the OS.
#include <malloc.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "log_text.hpp"
#include "secure_random.hpp"
#include "server_test_util.hpp"

namespace {

using namespace bp_test;
using grpc::StatusCode;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BP_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BP_OWN_ALLOCATOR 1
#endif
#endif

// A session on |core| (no token) from connection |peer|.
client hello_on(srv::service_core &core, const std::string &peer = "ipv4:127.0.0.1:40000") {
  client c;
  c.token.clear();
  c.peer = peer;
  pb::HelloRequest hq;
  hq.set_protocol_version(bp::remote::k_protocol_version);
  hq.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
  pb::HelloReply hr;
  EXPECT_TRUE(core.hello(c.meta(), hq, &hr).ok());
  c.session = hr.session();
  return c;
}

// A buffer of |size| bytes on |device| in |c|'s session.
uint64_t alloc_on(srv::service_core &core, const client &c, uint32_t device, uint64_t size) {
  pb::BufferAllocRequest q;
  q.set_device(device);
  q.set_size(size);
  pb::BufferAllocReply r;
  const grpc::Status st = core.buffer_alloc(c.meta(), q, &r);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return r.id();
}

TEST(SecureRandom, SessionIdsAre128BitsOfHexAndNeverRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = srv::secure_random_hex128();
    ASSERT_TRUE(srv::is_session_id(id)) << id;
    EXPECT_TRUE(seen.insert(id).second) << id;
  }
  // Every hex digit position takes many values: not a counter, not a
  // constant prefix.
  for (size_t pos : {0u, 15u, 31u}) {
    std::set<char> digits;
    for (const std::string &id : seen) digits.insert(id[pos]);
    EXPECT_EQ(digits.size(), 16u) << "position " << pos;
  }
  for (const char *bad : {"", "0123", "0123456789abcdef0123456789ABCDEF", "0123456789abcdef0123456789abcdeg"}) {
    EXPECT_FALSE(srv::is_session_id(bad)) << bad;
  }
}

TEST_F(ServerTest, ASessionAnswersOnlyToTheConnectionThatOpenedIt) {
  const uint64_t buf = alloc(c, 64);
  const uint8_t secret[4] = {1, 2, 3, 4};
  ASSERT_TRUE(write(c, buf, 0, secret, 4).ok());
  // The attacker knows the live session id and the buffer handle, but calls
  // from its own connection.
  client thief = c;
  thief.peer = "ipv4:127.0.0.1:40001";
  uint8_t got[4] = {};
  const grpc::Status stolen = read(thief, buf, 0, got, 4);
  EXPECT_EQ(stolen.error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(std::memcmp(got, "\0\0\0\0", 4), 0);
  // Exactly what a never-opened and a closed id get: nobody learns which
  // ids are live.
  client nobody = thief;
  nobody.session = srv::secure_random_hex128();
  uint8_t x;
  const grpc::Status unknown = read(nobody, buf, 0, &x, 1);
  EXPECT_EQ(unknown.error_code(), stolen.error_code());
  EXPECT_EQ(unknown.error_message(), stolen.error_message());
  client gone = open("ipv4:127.0.0.1:40002");
  ASSERT_TRUE(core->goodbye(gone.meta()).ok());
  const grpc::Status closed = read(gone, buf, 0, &x, 1);
  EXPECT_EQ(closed.error_message(), stolen.error_message());
  // Goodbye from the other connection does not close it either.
  EXPECT_STATUS(core->goodbye(thief.meta()), StatusCode::NOT_FOUND);
  ASSERT_TRUE(read(c, buf, 0, got, 4).ok());
  EXPECT_EQ(std::memcmp(got, secret, 4), 0);
}

TEST_F(ServerTest, ATokenSentTwiceIsRefused) {
  srv::call_meta m = c.meta();
  m.token_repeated = true;
  pb::Handle h;
  EXPECT_STATUS(core->backend_synchronize(m, h), StatusCode::UNAUTHENTICATED, "repeated");
  pb::HelloReply r;
  EXPECT_STATUS(core->hello(m, pb::HelloRequest(), &r), StatusCode::UNAUTHENTICATED);
}

TEST_F(ServerTest, CallsInFlightArePerSessionBounded) {
  // Streams that sent nothing yet hold their calls, up to the limit (8).
  std::vector<std::unique_ptr<srv::set_stream>> stuck;
  for (uint32_t i = 0; i < core->options().max_session_calls; ++i) {
    stuck.push_back(std::make_unique<srv::set_stream>());
    ASSERT_TRUE(core->set_tensor_begin(c.meta(), stuck.back().get()).ok()) << i;
  }
  srv::set_stream more;  // refused: it holds no slot although it lives on
  EXPECT_STATUS(core->set_tensor_begin(c.meta(), &more), StatusCode::RESOURCE_EXHAUSTED, "--max-session-calls");
  pb::DeviceMemoryReply dm;
  EXPECT_STATUS(core->device_memory(c.meta(), pb::DeviceRef(), &dm), StatusCode::RESOURCE_EXHAUSTED);
  // Other sessions are not affected.
  client other = open("ipv4:127.0.0.1:40003");
  EXPECT_TRUE(core->device_memory(other.meta(), pb::DeviceRef(), &dm).ok());
  // One stream ends: one call fits again.
  stuck.pop_back();
  EXPECT_TRUE(core->device_memory(c.meta(), pb::DeviceRef(), &dm).ok());
}

TEST_F(ServerTest, GraphRegistrationStopsWhenTheClientGivesUp) {
  const uint64_t be = backend(c);
  const uint64_t buf = alloc(c, 4096);
  pb::GraphRegisterRequest q;
  q.set_backend(be);
  *q.add_tensors() = desc(BP_TYPE_F32, {4}, BP_OP_NONE, {}, buf, 0);
  for (int i = 1; i <= 600; ++i) {
    *q.add_tensors() = desc(BP_TYPE_F32, {4}, BP_OP_NEG, {i - 1}, buf, 64 * (i % 64));
    q.add_nodes(static_cast<uint32_t>(i));
  }
  srv::call_meta m = c.meta();
  int looks = 0;
  m.cancelled = [&] { return ++looks > 1; };  // gives up after the first 256 nodes
  pb::Handle h;
  EXPECT_STATUS(core->graph_register(m, q, &h), StatusCode::CANCELLED, "256 of 600 nodes");
  // The session's lock and graph memory were let go.
  EXPECT_TRUE(core->graph_register(c.meta(), q, &h).ok());
}

// A backend and a 4 KiB buffer in |c|'s session, and a chain of 20 tensors
// (19 NEG nodes) in that buffer.
pb::GraphRegisterRequest small_chain(srv::service_core &core, const client &c) {
  pb::BackendOpenRequest bq;
  pb::Handle be;
  EXPECT_TRUE(core.backend_open(c.meta(), bq, &be).ok());
  const uint64_t buf = alloc_on(core, c, 0, 4096);
  pb::GraphRegisterRequest q;
  q.set_backend(be.id());
  *q.add_tensors() = desc(BP_TYPE_F32, {4}, BP_OP_NONE, {}, buf, 0);
  for (int i = 1; i < 20; ++i) {
    *q.add_tensors() = desc(BP_TYPE_F32, {4}, BP_OP_NEG, {i - 1}, buf, 64 * i);
    q.add_nodes(static_cast<uint32_t>(i));
  }
  return q;
}

TEST(ServerLimits, GraphMemoryIsChargedAgainstTheSessionQuota) {
  // What one such graph is charged, on a server without a quota.
  uint64_t one = 0;
  {
    srv::service_options o;
    o.devices = {cpu_device()};
    o.max_graph_memory = 0;
    srv::service_core core(o);
    client c = hello_on(core);
    pb::Handle h;
    ASSERT_TRUE(core.graph_register(c.meta(), small_chain(core, c), &h).ok());
    one = core.graph_memory(c.meta());
  }
  ASSERT_GT(one, 20 * sizeof(bp_tensor));  // its tensors at least
  srv::service_options o;
  o.devices = {cpu_device()};
  o.max_graph_memory = 2 * one + one / 2;  // two fit, the third does not
  srv::service_core core(o);
  client c = hello_on(core);
  pb::GraphRegisterRequest q = small_chain(core, c);
  pb::Handle g1, g2, g3;
  ASSERT_TRUE(core.graph_register(c.meta(), q, &g1).ok());
  ASSERT_TRUE(core.graph_register(c.meta(), q, &g2).ok());
  EXPECT_EQ(core.graph_memory(c.meta()), 2 * one);
  EXPECT_STATUS(core.graph_register(c.meta(), q, &g3), StatusCode::RESOURCE_EXHAUSTED, "--max-graph-memory");
  EXPECT_EQ(core.graph_memory(c.meta()), 2 * one) << "a refused graph is charged nothing";
  ASSERT_TRUE(core.graph_free(c.meta(), g1).ok());
  EXPECT_EQ(core.graph_memory(c.meta()), one);
  EXPECT_TRUE(core.graph_register(c.meta(), q, &g3).ok());
  // Freeing the buffer drops both graphs that use it, and their charge.
  pb::Handle b;
  b.set_id(q.tensors(0).buffer());
  ASSERT_TRUE(core.buffer_free(c.meta(), b).ok());
  EXPECT_EQ(core.graph_memory(c.meta()), 0u);
  const uint64_t buf = alloc_on(core, c, 0, 4096);
  for (int i = 0; i < q.tensors_size(); ++i) q.mutable_tensors(i)->set_buffer(buf);
  EXPECT_TRUE(core.graph_register(c.meta(), q, &g1).ok());
  EXPECT_TRUE(core.graph_register(c.meta(), q, &g2).ok());
}

TEST(ServerLimits, BackendThreadsArePerSessionAndDeviceBounded) {
  srv::service_options o;
  o.devices = {cpu_device()};
  o.max_threads = 2;
  srv::service_core core(o);
  client c = hello_on(core);
  auto open = [&](const char *threads, pb::Handle *h) {
    pb::BackendOpenRequest q;
    if (threads) {
      pb::Param *p = q.add_params();
      p->set_key("threads");
      p->set_value(threads);
    }
    return core.backend_open(c.meta(), q, h);
  };
  // threads=T starts T - 1 workers; 2 per session and device here.
  pb::Handle a, b, d, e;
  EXPECT_STATUS(open("256", &a), StatusCode::RESOURCE_EXHAUSTED, "--max-threads", "255 worker threads");
  EXPECT_STATUS(open("x", &a), StatusCode::INVALID_ARGUMENT, "threads");
  ASSERT_TRUE(open("3", &a).ok());
  EXPECT_STATUS(open("2", &d), StatusCode::RESOURCE_EXHAUSTED, "--max-threads");
  // Without threads= a backend takes what is left: here threads=1, which
  // starts no worker, so it always fits.
  ASSERT_TRUE(open(nullptr, &b).ok());
  ASSERT_TRUE(open("1", &e).ok());
  ASSERT_TRUE(core.backend_free(c.meta(), a).ok());
  EXPECT_TRUE(open("3", &d).ok());
}

// Every device this machine serves: a new buffer reads as zeros, whatever
// another session wrote into the memory before it was freed.
TEST(ServerLimits, NewBuffersReadAsZerosOnEveryDevice) {
  std::vector<bp_device *> devices;
  for (size_t i = 0; i < bp_device_count(); ++i) {
    bp_device *d = bp_device_get(i);
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_describe(d, &info) != BP_OK || !info.plugin) continue;
    const std::string plugin = bp_plugin_name(info.plugin);
    if (plugin == "remote" || plugin.rfind("fixture", 0) == 0) continue;
    devices.push_back(d);
  }
  ASSERT_FALSE(devices.empty());
  srv::service_options o;
  o.devices = devices;
  srv::service_core core(o);
  const size_t n = 64 << 10;
  const std::vector<uint8_t> marker(n, 0xA5);
  for (uint32_t dev = 0; dev < devices.size(); ++dev) {
    bp_device_info info{};
    info.struct_size = sizeof info;
    bp_device_describe(devices[dev], &info);
    SCOPED_TRACE(info.name);
    // A victim fills buffers and goes away; an attacker allocates the same
    // sizes and reads before writing.
    client victim = hello_on(core, "ipv4:127.0.0.1:41000");
    for (int i = 0; i < 4; ++i) {
      const uint64_t buf = alloc_on(core, victim, dev, n);
      srv::set_stream s;
      ASSERT_TRUE(core.set_tensor_begin(victim.meta(), &s).ok());
      pb::SetTensorChunk m;
      m.mutable_header()->set_buffer(buf);
      m.mutable_header()->set_size(n);
      m.set_data(marker.data(), n);
      ASSERT_TRUE(core.set_tensor_chunk(&s, m).ok());
    }
    ASSERT_TRUE(core.goodbye(victim.meta()).ok());
    client attacker = hello_on(core, "ipv4:127.0.0.1:41001");
    for (int i = 0; i < 4; ++i) {
      pb::GetTensorRequest g;
      g.set_buffer(alloc_on(core, attacker, dev, n));
      g.set_size(n);
      std::string got;
      ASSERT_TRUE(core.get_tensor(attacker.meta(), g,
                                  [&](const pb::DataChunk &d) {
                                    got += d.data();
                                    return true;
                                  })
                      .ok());
      ASSERT_EQ(got.size(), n);
      EXPECT_EQ(got.find_first_not_of('\0'), std::string::npos) << "buffer " << i << " holds old bytes";
    }
    ASSERT_TRUE(core.goodbye(attacker.meta()).ok());
  }
}

#ifndef BP_OWN_ALLOCATOR  // used by the tests that sanitizer builds skip
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
#endif

TEST(ServerLimits, AClosedSessionsMemoryGoesBackToTheOS) {
#ifdef BP_OWN_ALLOCATOR
  GTEST_SKIP() << "the sanitizer's allocator keeps freed memory by design";
#else
  srv::service_options o;
  o.devices = {cpu_device()};
  srv::service_core core(o);
  // Below glibc's mmap threshold, so the buffers come from the heap, and a
  // later allocation of another session above them keeps the heap's top
  // from shrinking by itself.
  malloc_trim(0);
  const size_t before = resident_bytes();
  client big = hello_on(core, "ipv4:127.0.0.1:42000");
  for (int i = 0; i < 2000; ++i) alloc_on(core, big, 0, 60 << 10);  // 117 MiB
  client pin = hello_on(core, "ipv4:127.0.0.1:42001");
  alloc_on(core, pin, 0, 64);
  const size_t full = resident_bytes();
  ASSERT_GT(full, before + (100u << 20));
  ASSERT_TRUE(core.goodbye(big.meta()).ok());
  const size_t after = resident_bytes();
  EXPECT_LT(after, before + (16u << 20)) << "resident: " << (before >> 20) << " MiB before, " << (full >> 20)
                                         << " with the session, " << (after >> 20) << " after it closed";
#endif
}

#ifndef BP_OWN_ALLOCATOR
// Heap bytes in use (every arena, and the chunks glibc maps on its own).
size_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}
#endif

// The graph-memory quota is filled by what registered graphs really hold
// (their contexts, graphs and node index): never more than the quota, and
// not a fraction of it either (a charge that is a multiple of the real cost
// would leave most of the quota unused).
TEST(ServerLimits, TheGraphQuotaIsFilledByWhatGraphsReallyHold) {
#ifdef BP_OWN_ALLOCATOR
  GTEST_SKIP() << "the sanitizer's allocator keeps its own books";
#else
  constexpr uint64_t k_quota = uint64_t{24} << 20;
  srv::service_options o;
  o.devices = {cpu_device()};
  o.max_graph_memory = k_quota;
  srv::service_core core(o);
  client c = hello_on(core);
  pb::BackendOpenRequest bq;
  pb::Handle be;
  ASSERT_TRUE(core.backend_open(c.meta(), bq, &be).ok());
  const uint64_t buf = alloc_on(core, c, 0, 1 << 16);
  // A chain, and a wide graph: many leaves, each pair added.
  pb::GraphRegisterRequest chain, wide;
  chain.set_backend(be.id());
  wide.set_backend(be.id());
  *chain.add_tensors() = desc(BP_TYPE_F32, {4, 2}, BP_OP_NONE, {}, buf, 0);
  for (int i = 1; i <= 8192; ++i) {
    *chain.add_tensors() = desc(BP_TYPE_F32, {4, 2}, BP_OP_NEG, {i - 1}, buf, 64 * (i % 1000));
    chain.add_nodes(static_cast<uint32_t>(i));
  }
  for (int i = 0; i < 4096; ++i) {
    const int a = wide.tensors_size();
    *wide.add_tensors() = desc(BP_TYPE_F32, {4, 2}, BP_OP_NONE, {}, buf, 64 * (a % 1000));
    *wide.add_tensors() = desc(BP_TYPE_F32, {4, 2}, BP_OP_NONE, {}, buf, 64 * ((a + 1) % 1000));
    *wide.add_tensors() = desc(BP_TYPE_F32, {4, 2}, BP_OP_ADD, {a, a + 1}, buf, 64 * ((a + 2) % 1000));
    wide.add_nodes(static_cast<uint32_t>(a + 2));
  }
  for (const pb::GraphRegisterRequest *q : {&chain, &wide}) {
    SCOPED_TRACE(q == &chain ? "chain" : "wide");
    malloc_trim(0);
    const size_t before = heap_in_use();
    std::vector<pb::Handle> held;
    for (;;) {
      pb::Handle h;
      const grpc::Status st = core.graph_register(c.meta(), *q, &h);
      if (!st.ok()) {
        ASSERT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
        break;
      }
      held.push_back(h);
      ASSERT_LT(held.size(), 1000u);
    }
    const size_t kept = heap_in_use() - before;
    const size_t n = held.size();
    RecordProperty(q == &chain ? "chain_graphs" : "wide_graphs", static_cast<int>(n));
    EXPECT_LE(kept, k_quota) << n << " graphs hold " << (kept >> 10) << " KiB";
    EXPECT_GE(kept, k_quota / 2) << n << " graphs hold only " << (kept >> 10) << " KiB of a " << (k_quota >> 10)
                                 << " KiB quota: the charge is far above the real cost";
    for (const pb::Handle &h : held) ASSERT_TRUE(core.graph_free(c.meta(), h).ok());
    EXPECT_EQ(core.graph_memory(c.meta()), 0u);
  }
#endif
}

TEST(LogText, ClientStringsAreEscapedAndCut) {
  EXPECT_EQ(srv::log_text("0.2.0"), "0.2.0");
  EXPECT_EQ(srv::log_text("a\nb"), "a\\x0ab");
  EXPECT_EQ(srv::log_text("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(srv::log_text("back\\slash"), "back\\x5cslash");
  EXPECT_EQ(srv::log_text("\xc3\xa9"), "\\xc3\\xa9");
  const std::string huge(1 << 20, 'v');
  const std::string cut = srv::log_text(huge);
  EXPECT_LT(cut.size(), 100u);
  EXPECT_NE(cut.find("+1048512 bytes"), std::string::npos) << cut;
}

TEST_F(ServerTest, HelloLogsTheClientVersionEscaped) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  logger->set_pattern("%l: %v");
  auto old = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  pb::HelloRequest q;
  q.set_protocol_version(bp::remote::k_protocol_version);
  q.set_op_table_fingerprint(bp::remote::op_table_fingerprint());
  q.set_client_version("0.2\ncritical: FORGED token accepted from 10.6.6.6\x1b[2J" + std::string(1 << 20, 'x'));
  pb::HelloReply r;
  client cl;
  cl.peer = "ipv4:127.0.0.1:43000";
  ASSERT_TRUE(core->hello(cl.meta(), q, &r).ok());
  spdlog::set_default_logger(old);
  const std::string log = captured.str();
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;  // one line, no forged second one
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_NE(log.find("0.2\\x0acritical"), std::string::npos) << log;
  EXPECT_LT(log.size(), 512u);
}

}  // namespace
