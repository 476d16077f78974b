// The remote plugin's wire pieces without a server: the op-table
// fingerprint agrees with the protocol's (which needs libbackplane), and a
// graph is described with every tensor after its sources, views pointing
// at their view source, and memory as (buffer handle, offset).
#include <gtest/gtest.h>

#include <memory>

#include "backplane/backplane.h"
#include "fingerprint.hpp"
#include "graph_wire.hpp"
#include "protocol.hpp"

namespace {

namespace rp = bp::remote_plugin;

TEST(RemoteWire, FingerprintMatchesTheProtocolLibrary) {
  EXPECT_EQ(rp::op_table_fingerprint(), bp::remote::op_table_fingerprint_with(bp_op_name));
  for (int op = 0; op < BP_OP_COUNT; ++op)
    EXPECT_STREQ(bp::plugins::op_name(static_cast<bp_op>(op)), bp_op_name(static_cast<bp_op>(op)));
}

struct RemoteGraphWire : ::testing::Test {
  bp_context *ctx = bp_context_new(0);
  rp::session sess;
  rp::remote_buffer buf;
  std::unique_ptr<char[]> fake_base_holder;
  void SetUp() override {
    buf.sess = std::shared_ptr<rp::session>(&sess, [](rp::session *) {});
    buf.handle = 77;
    buf.size = 1 << 20;
    buf.base = reinterpret_cast<char *>(uintptr_t(1) << 40);
  }
  void TearDown() override { bp_context_free(ctx); }
  void place(bp_tensor *t, size_t offset) {
    t->buffer_ctx = &buf;
    t->data = buf.base + offset;
  }
};

TEST_F(RemoteGraphWire, SourcesComeFirstAndViewsPointAtTheirSource) {
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 4);
  bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 4);
  bp_tensor *sum = bp_add(ctx, a, b);
  bp_tensor *row = bp_view_1d(ctx, sum, 8, 32);
  bp_tensor *out = bp_scale(ctx, row, 2.0f);
  ASSERT_NE(out, nullptr) << bp_last_error();
  place(a, 0);
  place(b, 256);
  place(sum, 512);
  row->buffer_ctx = &buf;
  row->data = static_cast<char *>(sum->data) + 32;
  place(out, 1024);
  bp_tensor *nodes[] = {sum, row, out};
  bp_graph_desc g{sizeof g, 3, nodes};
  rp::pb::GraphRegisterRequest req;
  bp_error err{};
  ASSERT_EQ(rp::describe_graph(&g, &sess, &req, &err), BP_OK) << err.message;
  ASSERT_EQ(req.tensors_size(), 5);
  ASSERT_EQ(req.nodes_size(), 3);
  for (int i = 0; i < req.tensors_size(); ++i) {
    const auto &t = req.tensors(i);
    for (int32_t s : t.src()) EXPECT_LT(s, i) << "tensor " << i << " uses a later tensor";
    EXPECT_LT(t.view_src(), i);
  }
  const auto &d_sum = req.tensors(static_cast<int>(req.nodes(0)));
  EXPECT_EQ(d_sum.op(), static_cast<uint32_t>(BP_OP_ADD));
  EXPECT_EQ(d_sum.buffer(), 77u);
  EXPECT_EQ(d_sum.offset(), 512u);
  const auto &d_row = req.tensors(static_cast<int>(req.nodes(1)));
  EXPECT_EQ(d_row.view_src(), static_cast<int32_t>(req.nodes(0)));
  EXPECT_EQ(d_row.view_offs(), 32u);
  EXPECT_EQ(d_row.buffer(), 0u) << "a view's memory is its source's";
  const auto &d_out = req.tensors(static_cast<int>(req.nodes(2)));
  EXPECT_EQ(d_out.op(), static_cast<uint32_t>(BP_OP_SCALE));
  EXPECT_EQ(bp::remote_plugin::hash_bytes(req.SerializeAsString()),
            bp::remote_plugin::hash_bytes(req.SerializeAsString()));
}

TEST_F(RemoteGraphWire, ATensorOutsideTheSessionIsRefusedByName) {
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
  bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
  bp_tensor *c = bp_add(ctx, a, b);
  bp_tensor_set_name(b, "host_weights");
  float host[8];
  place(a, 0);
  b->data = host;  // memory of another plugin
  place(c, 64);
  bp_tensor *nodes[] = {c};
  bp_graph_desc g{sizeof g, 1, nodes};
  rp::pb::GraphRegisterRequest req;
  bp_error err{};
  EXPECT_EQ(rp::describe_graph(&g, &sess, &req, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("host_weights"), std::string::npos) << err.message;
}

TEST_F(RemoteGraphWire, ANodeIsDescribedWithoutMemoryOrNames) {
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 4);
  bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 4);
  bp_tensor *x = bp_add(ctx, a, b);
  bp_tensor *y = bp_relu(ctx, x);
  bp_tensor_set_name(y, "first");
  place(x, 0);
  rp::pb::SupportsOpRequest r1, r2;
  rp::describe_node(y, &r1);
  ASSERT_EQ(r1.tensors_size(), 2);  // x as a leaf, then y
  EXPECT_EQ(r1.tensors(0).op(), static_cast<uint32_t>(BP_OP_NONE));
  EXPECT_EQ(r1.tensors(1).op(), static_cast<uint32_t>(BP_OP_RELU));
  EXPECT_EQ(r1.tensors(1).src(0), 0);
  EXPECT_EQ(r1.tensors(1).buffer(), 0u);
  // Another node of the same shape elsewhere asks the same question.
  bp_tensor *z = bp_relu(ctx, bp_add(ctx, b, a));
  bp_tensor_set_name(z, "second");
  rp::describe_node(z, &r2);
  EXPECT_EQ(r1.SerializeAsString(), r2.SerializeAsString());
}

}  // namespace
