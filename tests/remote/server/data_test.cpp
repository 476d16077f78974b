// data_test.cpp: SetTensor, GetTensor, CopyBuffer, BufferMemset and
// BufferClear through the service core: bytes land where they were sent,
// and every range is checked against the buffer (overflow included).
#include <cstring>
#include <numeric>
#include <vector>

#include "server_test_util.hpp"

namespace {

using namespace bp_test;
using grpc::StatusCode;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST_F(ServerTest, BytesRoundTripAtAnyOffsetAndChunking) {
  const uint64_t buf = alloc(c, 1001);  // odd: the last byte is reachable too
  const auto data = pattern(1001, 3);
  ASSERT_TRUE(write(c, buf, 0, data.data(), data.size()).ok());
  std::vector<uint8_t> got(1001);
  ASSERT_TRUE(read(c, buf, 0, got.data(), got.size(), 100).ok());
  EXPECT_EQ(got, data);
  // An odd offset and size, read back in 7-byte chunks.
  const auto part = pattern(13, 200);
  ASSERT_TRUE(write(c, buf, 987, part.data(), part.size()).ok());
  std::vector<uint8_t> back(14);
  ASSERT_TRUE(read(c, buf, 987, back.data(), back.size(), 7).ok());
  EXPECT_EQ(std::vector<uint8_t>(back.begin(), back.begin() + 13), part);
  EXPECT_EQ(back[13], data[1000]);
}

TEST_F(ServerTest, SetTensorStreamsInSeveralChunks) {
  const uint64_t buf = alloc(c, 64);
  const auto data = pattern(40, 9);
  srv::set_stream s;
  ASSERT_TRUE(core->set_tensor_begin(c.meta(), &s).ok());
  pb::SetTensorChunk m;
  m.mutable_header()->set_buffer(buf);
  m.mutable_header()->set_offset(8);
  m.mutable_header()->set_size(40);
  ASSERT_TRUE(core->set_tensor_chunk(&s, m).ok());  // a header alone
  for (size_t at = 0; at < 40; at += 15) {
    pb::SetTensorChunk d;
    d.set_data(data.data() + at, std::min<size_t>(15, 40 - at));
    ASSERT_TRUE(core->set_tensor_chunk(&s, d).ok());
  }
  ASSERT_TRUE(core->set_tensor_finish(&s).ok());
  std::vector<uint8_t> got(40);
  ASSERT_TRUE(read(c, buf, 8, got.data(), 40).ok());
  EXPECT_EQ(got, data);
}

TEST_F(ServerTest, TransfersOutsideTheBufferAreRefused) {
  const uint64_t buf = alloc(c, 64);
  const auto data = pattern(64, 1);
  EXPECT_STATUS(write(c, buf, 1, data.data(), 64), StatusCode::INVALID_ARGUMENT, "outside the buffer of 64 bytes");
  EXPECT_STATUS(write(c, buf, 65, data.data(), 0), StatusCode::INVALID_ARGUMENT);
  std::vector<uint8_t> got(64);
  EXPECT_STATUS(read(c, buf, 60, got.data(), 5), StatusCode::INVALID_ARGUMENT, "outside");
  // offset + size wraps around 2^64.
  pb::GetTensorRequest q;
  q.set_buffer(buf);
  q.set_offset(UINT64_MAX - 1);
  q.set_size(4);
  EXPECT_STATUS(core->get_tensor(c.meta(), q, [](const pb::DataChunk &) { return true; }),
                StatusCode::INVALID_ARGUMENT);
  q.set_offset(0);
  q.set_size(4);
  q.set_chunk_bytes(uint64_t{1} << 40);
  EXPECT_STATUS(core->get_tensor(c.meta(), q, [](const pb::DataChunk &) { return true; }), StatusCode::INVALID_ARGUMENT,
                "chunk_bytes");
  // A header announcing N bytes: more is refused, fewer fails at the end.
  srv::set_stream s;
  ASSERT_TRUE(core->set_tensor_begin(c.meta(), &s).ok());
  pb::SetTensorChunk m;
  m.mutable_header()->set_buffer(buf);
  m.mutable_header()->set_offset(UINT64_MAX);
  m.mutable_header()->set_size(2);
  EXPECT_STATUS(core->set_tensor_chunk(&s, m), StatusCode::INVALID_ARGUMENT);
  srv::set_stream s2;
  ASSERT_TRUE(core->set_tensor_begin(c.meta(), &s2).ok());
  m.mutable_header()->set_offset(0);
  m.mutable_header()->set_size(4);
  m.set_data(data.data(), 3);
  ASSERT_TRUE(core->set_tensor_chunk(&s2, m).ok());
  EXPECT_STATUS(core->set_tensor_finish(&s2), StatusCode::INVALID_ARGUMENT, "3 of the 4 bytes");
  pb::SetTensorChunk more;
  more.set_data(data.data(), 2);
  EXPECT_STATUS(core->set_tensor_chunk(&s2, more), StatusCode::INVALID_ARGUMENT, "announced 4");
  EXPECT_STATUS(core->set_tensor_chunk(&s2, m), StatusCode::INVALID_ARGUMENT, "only the first");
  srv::set_stream s3;
  ASSERT_TRUE(core->set_tensor_begin(c.meta(), &s3).ok());
  EXPECT_STATUS(core->set_tensor_chunk(&s3, more), StatusCode::INVALID_ARGUMENT, "header");
  pb::BufferMemsetRequest ms;
  ms.set_buffer(buf);
  ms.set_offset(32);
  ms.set_size(33);
  EXPECT_STATUS(core->buffer_memset(c.meta(), ms), StatusCode::INVALID_ARGUMENT, "outside");
  ms.set_size(1);
  ms.set_value(256);
  EXPECT_STATUS(core->buffer_memset(c.meta(), ms), StatusCode::INVALID_ARGUMENT, "not a byte");
}

TEST_F(ServerTest, CopyBufferMemsetAndClear) {
  const uint64_t a = alloc(c, 100), b = alloc(c, 100);
  const auto data = pattern(100, 50);
  ASSERT_TRUE(write(c, a, 0, data.data(), 100).ok());
  pb::BufferClearRequest clr;
  clr.set_buffer(b);
  clr.set_value(0xEE);
  ASSERT_TRUE(core->buffer_clear(c.meta(), clr).ok());
  // Even offsets and size (device copy) and odd ones (through the host).
  for (auto [so, dof, n] : {std::tuple<uint64_t, uint64_t, uint64_t>{10, 20, 40}, {3, 51, 37}}) {
    pb::CopyBufferRequest q;
    q.set_src_buffer(a);
    q.set_src_offset(so);
    q.set_dst_buffer(b);
    q.set_dst_offset(dof);
    q.set_size(n);
    ASSERT_TRUE(core->copy_buffer(c.meta(), q).ok());
  }
  std::vector<uint8_t> got(100);
  ASSERT_TRUE(read(c, b, 0, got.data(), 100).ok());
  for (size_t i = 0; i < 100; ++i) {
    uint8_t want = 0xEE;
    if (i >= 20 && i < 60) want = data[i - 10];
    if (i >= 51 && i < 88) want = data[i - 48];
    ASSERT_EQ(got[i], want) << "byte " << i;
  }
  pb::BufferMemsetRequest ms;
  ms.set_buffer(b);
  ms.set_offset(5);
  ms.set_size(3);
  ms.set_value(7);
  ASSERT_TRUE(core->buffer_memset(c.meta(), ms).ok());
  ASSERT_TRUE(read(c, b, 4, got.data(), 5).ok());
  EXPECT_EQ(got[0], 0xEE);
  EXPECT_EQ(got[1], 7);
  EXPECT_EQ(got[3], 7);
  EXPECT_EQ(got[4], 0xEE);
  pb::CopyBufferRequest q;
  q.set_src_buffer(a);
  q.set_dst_buffer(a);
  q.set_src_offset(0);
  q.set_dst_offset(10);
  q.set_size(20);
  EXPECT_STATUS(core->copy_buffer(c.meta(), q), StatusCode::INVALID_ARGUMENT, "overlap");
  q.set_dst_buffer(b);
  q.set_dst_offset(90);
  EXPECT_STATUS(core->copy_buffer(c.meta(), q), StatusCode::INVALID_ARGUMENT, "destination");
}

}  // namespace
