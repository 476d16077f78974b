// graph_test.cpp: GraphRegister rebuilds a description through the core's
// own rules: a valid graph computes the right numbers (checked against a
// double-precision reference), and each kind of bad description is refused
// with INVALID_ARGUMENT naming the node and its op. SupportsOp too.
#include <cmath>
#include <cstring>
#include <vector>

#include "backplane/trace.h"
#include "server_test_util.hpp"

namespace {

using namespace bp_test;
using grpc::StatusCode;

int32_t bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

class GraphTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    buf = alloc(c, 1024);
    be = backend(c);
  }

  // a [K=4, M=3] x b [K=4, N=2] -> mm [3, 2] -> scale(0.5) [3, 2], at
  // offsets 0, 256, 512, 768 of |buf|.
  pb::GraphRegisterRequest good() {
    pb::GraphRegisterRequest q;
    q.set_backend(be);
    *q.add_tensors() = desc(BP_TYPE_F32, {4, 3}, BP_OP_NONE, {}, buf, 0);
    *q.add_tensors() = desc(BP_TYPE_F32, {4, 2}, BP_OP_NONE, {}, buf, 256);
    *q.add_tensors() = desc(BP_TYPE_F32, {3, 2}, BP_OP_MUL_MAT, {0, 1}, buf, 512);
    pb::TensorDesc s = desc(BP_TYPE_F32, {3, 2}, BP_OP_SCALE, {2}, buf, 768);
    s.add_op_params(bits(0.5f));
    *q.add_tensors() = s;
    q.add_nodes(2);
    q.add_nodes(3);
    return q;
  }

  grpc::Status reg(const pb::GraphRegisterRequest &q, uint64_t *id = nullptr) {
    pb::Handle h;
    grpc::Status st = core->graph_register(c.meta(), q, &h);
    if (id) *id = h.id();
    return st;
  }

  uint64_t buf = 0, be = 0;
};

// A client that traces asks for node times: each registered node once, named
// by its position in the request's node list, inside the call's duration.
// Asked for nothing, the reply stays empty.
TEST_F(GraphTest, NodeTimesAreRepliedOnlyWhenAsked) {
  uint64_t g = 0;
  ASSERT_TRUE(reg(good(), &g).ok());
  pb::GraphComputeRequest q;
  q.set_id(g);
  pb::GraphComputeReply plain;
  ASSERT_TRUE(core->graph_compute(c.meta(), q, &plain).ok());
  EXPECT_EQ(plain.nodes_size(), 0);
  EXPECT_EQ(plain.duration_ns(), 0u);
  q.set_node_times(true);
  pb::GraphComputeReply timed;
  grpc::Status st = core->graph_compute(c.meta(), q, &timed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(timed.nodes_size(), 2);
  EXPECT_GT(timed.duration_ns(), 0u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(timed.nodes(i).node(), static_cast<uint32_t>(i)) << "MUL_MAT, then SCALE";
    EXPECT_LE(timed.nodes(i).begin_ns(), timed.nodes(i).end_ns());
    EXPECT_LE(timed.nodes(i).end_ns(), timed.duration_ns());
  }
  EXPECT_LE(timed.nodes(0).end_ns(), timed.nodes(1).begin_ns());
  EXPECT_FALSE(bp_trace_active()) << "the server records no trace of its own";
}

TEST_F(GraphTest, RegisteredGraphComputesAgainAndAgain) {
  uint64_t g = 0;
  ASSERT_TRUE(reg(good(), &g).ok());
  pb::Handle h;
  h.set_id(g);
  for (int run = 0; run < 2; ++run) {
    float a[12], b[8];
    for (int i = 0; i < 12; ++i) a[i] = 0.25f * static_cast<float>(i - 5 + run);
    for (int i = 0; i < 8; ++i) b[i] = 1.5f - 0.5f * static_cast<float>(i * run);
    ASSERT_TRUE(write(c, buf, 0, a, sizeof a).ok());
    ASSERT_TRUE(write(c, buf, 256, b, sizeof b).ok());
    grpc::Status st = core->graph_compute(c.meta(), h);
    ASSERT_TRUE(st.ok()) << st.error_message();
    float out[6];
    ASSERT_TRUE(read(c, buf, 768, out, sizeof out).ok());
    for (int n = 0; n < 2; ++n) {
      for (int m = 0; m < 3; ++m) {
        double want = 0;
        for (int k = 0; k < 4; ++k) want += static_cast<double>(a[m * 4 + k]) * static_cast<double>(b[n * 4 + k]);
        EXPECT_NEAR(out[n * 3 + m], 0.5 * want, 1e-5) << "run " << run << " m " << m << " n " << n;
      }
    }
  }
  ASSERT_TRUE(core->graph_free(c.meta(), h).ok());
  EXPECT_STATUS(core->graph_compute(c.meta(), h), StatusCode::NOT_FOUND);
}

TEST_F(GraphTest, BadDescriptionsNameTheNodeAndOp) {
  pb::GraphRegisterRequest q = good();
  q.mutable_tensors(2)->set_op(999);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2", "unknown op 999");

  q = good();
  q.mutable_tensors(0)->set_type(BP_TYPE_COUNT);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)", "unknown type");

  q = good();  // the described shape is not what MUL_MAT gives
  q.mutable_tensors(2)->set_ne(0, 4);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2 (MUL_MAT)", "described as [4,2,1,1]", "[3,2,1,1]");

  q = good();  // the sources break MUL_MAT's rule
  q.mutable_tensors(1)->set_ne(0, 5);
  q.mutable_tensors(1)->set_nb(1, 20);
  q.mutable_tensors(1)->set_nb(2, 40);
  q.mutable_tensors(1)->set_nb(3, 40);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2 (MUL_MAT)", "bp_mul_mat");

  q = good();  // more parameter words than SCALE reads
  q.mutable_tensors(3)->add_op_params(bits(1.0f));
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 3 (SCALE)", "2 parameter words");

  q = good();
  for (int i = 0; i < 17; ++i) q.mutable_tensors(3)->add_op_params(1);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 3 (SCALE)", "at most 16");

  q = good();  // a source that is not an earlier tensor
  q.mutable_tensors(2)->set_src(1, 3);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2 (MUL_MAT)", "earlier tensor");
  q.mutable_tensors(2)->set_src(1, -2);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2 (MUL_MAT)", "index -2");

  q = good();  // a wrong number of sources
  q.mutable_tensors(2)->clear_src();
  q.mutable_tensors(2)->add_src(0);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2 (MUL_MAT)", "1 sources given");

  q = good();  // placed past the end of the buffer, and across it
  q.mutable_tensors(3)->set_offset(1024);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 3 (SCALE)", "do not fit");
  q.mutable_tensors(3)->set_offset(UINT64_MAX - 8);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 3 (SCALE)", "do not fit");
  q.mutable_tensors(3)->set_offset(1008);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 3 (SCALE)", "do not fit");

  q = good();  // misaligned
  q.mutable_tensors(0)->set_offset(4);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)", "alignment");

  q = good();  // no memory, or memory of a handle this session does not have
  q.mutable_tensors(2)->set_buffer(0);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 2 (MUL_MAT)", "no buffer");
  q.mutable_tensors(2)->set_buffer(buf + 1);
  EXPECT_STATUS(reg(q), StatusCode::NOT_FOUND, "node 2 (MUL_MAT)");

  q = good();  // malformed shapes
  q.mutable_tensors(0)->add_ne(1);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)", "4 entries");
  q = good();
  q.mutable_tensors(0)->set_ne(1, 0);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)");
  q = good();
  q.mutable_tensors(0)->set_ne(1, int64_t{1} << 62);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)");

  q = good();  // a leaf with a source
  q.mutable_tensors(1)->add_src(0);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 1 (NONE)", "no sources");

  q = good();
  q.add_nodes(9);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "nodes[2]", "4 tensors");
  q = good();
  q.clear_nodes();
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "no nodes");

  q = good();
  q.set_backend(be + 1);
  EXPECT_STATUS(reg(q), StatusCode::NOT_FOUND, "backend handle");

  q = good();
  q.mutable_tensors(0)->set_name(std::string(200, 'x'));
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)", "name");
  q = good();
  q.mutable_tensors(0)->set_flags(1u << 20);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 0 (NONE)", "flag");

  // None of that left a graph or changed the session's handles.
  uint64_t g = 0;
  EXPECT_TRUE(reg(good(), &g).ok());
}

TEST_F(GraphTest, ViewsAreRebuiltAndCheckedAgainstTheirSource) {
  pb::GraphRegisterRequest q = good();
  // A view of a's second row (4 floats at byte 16), then NEG of it.
  pb::TensorDesc v = desc(BP_TYPE_F32, {4}, BP_OP_VIEW, {0});
  v.set_view_src(0);
  v.set_view_offs(16);
  *q.add_tensors() = v;                                                 // 4
  *q.add_tensors() = desc(BP_TYPE_F32, {4}, BP_OP_NEG, {4}, buf, 896);  // 5
  q.add_nodes(5);
  uint64_t g = 0;
  ASSERT_TRUE(reg(q, &g).ok()) << reg(q).error_message();
  float a[12];
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  ASSERT_TRUE(write(c, buf, 0, a, sizeof a).ok());
  pb::Handle h;
  h.set_id(g);
  ASSERT_TRUE(core->graph_compute(c.meta(), h).ok());
  float out[4];
  ASSERT_TRUE(read(c, buf, 896, out, sizeof out).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], -a[4 + i]);

  q.mutable_tensors(4)->set_view_offs(40);  // 16 bytes at 40 of a 48-byte tensor
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 4 (VIEW)");
  q.mutable_tensors(4)->set_view_offs(16);
  q.mutable_tensors(4)->set_view_src(-1);
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 4 (VIEW)", "view_src");
  q.mutable_tensors(4)->set_view_src(1);  // aliases b, but its source is a
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 4 (VIEW)", "aliasing tensor 1");
  q.mutable_tensors(4)->set_view_src(0);
  q.mutable_tensors(4)->set_nb(0, 8);  // a VIEW's nb[0] is the element size
  EXPECT_STATUS(reg(q), StatusCode::INVALID_ARGUMENT, "node 4 (VIEW)", "nb[0]");
}

TEST_F(GraphTest, AGraphGoesWithABufferOrBackendItUses) {
  uint64_t g = 0;
  ASSERT_TRUE(reg(good(), &g).ok());
  pb::Handle hb, hg;
  hb.set_id(buf);
  hg.set_id(g);
  ASSERT_TRUE(core->buffer_free(c.meta(), hb).ok());
  EXPECT_STATUS(core->graph_compute(c.meta(), hg), StatusCode::NOT_FOUND, "dropped");
  buf = alloc(c, 1024);
  ASSERT_TRUE(reg(good(), &g).ok());
  hg.set_id(g);
  hb.set_id(be);
  ASSERT_TRUE(core->backend_free(c.meta(), hb).ok());
  EXPECT_STATUS(core->graph_compute(c.meta(), hg), StatusCode::NOT_FOUND);
}

TEST_F(GraphTest, SupportsOpRebuildsTheNodeWithoutMemory) {
  pb::SupportsOpRequest q;
  q.set_backend(be);
  *q.add_tensors() = desc(BP_TYPE_F32, {4, 3});
  *q.add_tensors() = desc(BP_TYPE_F32, {4, 3});
  *q.add_tensors() = desc(BP_TYPE_F32, {4, 3}, BP_OP_ADD, {0, 1});
  pb::SupportsOpReply r;
  grpc::Status st = core->supports_op(c.meta(), q, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(r.supported());

  // A transposed source known only by its memory root (src -1): rebuilt
  // from its strides.
  pb::SupportsOpRequest t;
  t.set_backend(be);
  *t.add_tensors() = desc(BP_TYPE_F32, {4, 3});
  pb::TensorDesc tr = desc(BP_TYPE_F32, {3, 4}, BP_OP_TRANSPOSE);
  tr.set_nb(0, 16);
  tr.set_nb(1, 4);
  tr.set_nb(2, 48);
  tr.set_nb(3, 48);
  tr.set_view_src(0);
  *t.add_tensors() = tr;
  *t.add_tensors() = desc(BP_TYPE_F32, {3, 4}, BP_OP_CONT, {1});
  st = core->supports_op(c.meta(), t, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(r.supported());

  *q.mutable_tensors(2) = desc(BP_TYPE_F32, {4, 3}, BP_OP_ADD, {0, 2});
  EXPECT_STATUS(core->supports_op(c.meta(), q, &r), StatusCode::INVALID_ARGUMENT, "node 2 (ADD)");
  q.clear_tensors();
  EXPECT_STATUS(core->supports_op(c.meta(), q, &r), StatusCode::INVALID_ARGUMENT, "no tensors");
}

}  // namespace
