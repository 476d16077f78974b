// plugin_abi_test.cpp: the cpu plugin's descriptor, entry, device, buffers,
// backend creation and events, through the C ABI only.
#include <cstdint>

#include "cpu_harness.hpp"

using namespace cpu_test;

TEST(CpuPluginAbi, DescriptorAndEntry) {
  loaded_plugin p(-1);
  ASSERT_TRUE(p.iface);
  EXPECT_EQ(p.desc->magic, BP_PLUGIN_MAGIC);
  EXPECT_EQ(p.desc->abi_major, (uint32_t)BP_PLUGIN_ABI_VERSION);
  EXPECT_STREQ(p.desc->name, "cpu");
  EXPECT_EQ(p.iface->struct_size, sizeof(bp_plugin_i));
  ASSERT_EQ(p.iface->n_params, 2u);
  EXPECT_STREQ(p.iface->params[0].name, "threads");
  EXPECT_EQ(p.iface->params[0].type, BP_PARAM_INT);
  EXPECT_EQ(p.iface->params[0].min_value, 0);
  EXPECT_EQ(p.iface->params[0].max_value, 256);
  EXPECT_STREQ(p.iface->params[1].name, "fuse");
  EXPECT_EQ(p.iface->params[1].type, BP_PARAM_BOOL);
  EXPECT_STREQ(p.iface->params[1].default_value, "true");

  bp_error err{};
  EXPECT_EQ(p.entry(BP_PLUGIN_ABI_VERSION + 1, nullptr, &err), nullptr);
  EXPECT_EQ(err.code, BP_ERR_INCOMPATIBLE);
  EXPECT_NE(std::string(err.message).find("ABI"), std::string::npos) << err.message;
}

TEST(CpuPluginAbi, OneDeviceWithProps) {
  loaded_plugin p(-1);
  ASSERT_TRUE(p.iface);
  EXPECT_EQ(p.iface->device_count(p.ctx), 1u);
  bp_device_ref d{};
  bp_error err{};
  EXPECT_EQ(p.iface->device_get(p.ctx, 1, &d, &err), BP_ERR_NOT_FOUND);
  bp_device_props props{};
  props.struct_size = sizeof props;
  ASSERT_EQ(p.dev.iface->get_props(p.dev.ctx, &props, &err), BP_OK) << err.message;
  EXPECT_STREQ(props.name, "CPU");
  EXPECT_STREQ(props.id, "cpu-0");
  EXPECT_EQ(props.type, BP_DEVICE_TYPE_CPU);
  EXPECT_TRUE(props.caps & BP_DEVICE_CAP_HOST_MEMORY);
  EXPECT_TRUE(props.caps & BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR);
  EXPECT_GT(props.memory_total, 0u);
  EXPECT_LE(props.memory_free, props.memory_total);
  EXPECT_GT(std::strlen(props.description), 0u);

  // An older, smaller props struct is filled only as far as it reaches.
  bp_device_props small{};
  small.struct_size = offsetof(bp_device_props, description);
  small.description = "untouched";
  ASSERT_EQ(p.dev.iface->get_props(p.dev.ctx, &small, &err), BP_OK);
  EXPECT_STREQ(small.name, "CPU");
  EXPECT_STREQ(small.description, "untouched");
}

TEST(CpuPluginAbi, BuffersAllocateSetGetClear) {
  loaded_plugin p(-1);
  ASSERT_TRUE(p.iface);
  bp_buffer_type_ref bt = p.dev.iface->buffer_type(p.dev.ctx);
  ASSERT_TRUE(bt.iface);
  EXPECT_STREQ(bt.iface->name(bt.ctx), "CPU");
  EXPECT_EQ(bt.iface->alignment(bt.ctx), 64u);
  EXPECT_TRUE(bt.iface->is_host(bt.ctx));
  bp_error err{};
  bp_buffer_ref zero{};
  ASSERT_EQ(bt.iface->alloc(bt.ctx, 0, &zero, &err), BP_OK) << err.message;
  EXPECT_EQ(zero.iface->clear(zero.ctx, 0, &err), BP_OK);
  zero.iface->free(zero.ctx);

  for (size_t size : {1u, 7u, 1000u}) {
    bp_buffer_ref b{};
    ASSERT_EQ(bt.iface->alloc(bt.ctx, size, &b, &err), BP_OK) << err.message;
    char *base = static_cast<char *>(b.iface->base(b.ctx));
    ASSERT_NE(base, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 64, 0u);
    ASSERT_EQ(b.iface->clear(b.ctx, 0x5A, &err), BP_OK);
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(base[i], 0x5A);
    bp_tensor t{};
    t.struct_size = sizeof t;
    t.data = base;
    std::vector<char> in(size, 3), out(size, 0);
    ASSERT_EQ(b.iface->set_tensor(b.ctx, &t, in.data(), 0, size, &err), BP_OK);
    ASSERT_EQ(b.iface->get_tensor(b.ctx, &t, out.data(), 0, size, &err), BP_OK);
    EXPECT_EQ(in, out);
    ASSERT_EQ(b.iface->memset_tensor(b.ctx, &t, 9, size - 1, 1, &err), BP_OK);
    EXPECT_EQ(base[size - 1], 9);
    // Out of range is refused, not written.
    EXPECT_EQ(b.iface->set_tensor(b.ctx, &t, in.data(), 1, size, &err), BP_ERR_INVALID_ARGUMENT);
    b.iface->free(b.ctx);
  }
}

TEST(CpuPluginAbi, BufferFromHostPtrDoesNotOwn) {
  loaded_plugin p(-1);
  ASSERT_TRUE(p.iface);
  std::vector<float> user(16, 1.0f);
  bp_buffer_ref b{};
  bp_error err{};
  ASSERT_EQ(p.dev.iface->buffer_from_host_ptr(p.dev.ctx, user.data(), user.size() * 4, &b, &err), BP_OK);
  EXPECT_EQ(b.iface->base(b.ctx), user.data());
  ASSERT_EQ(b.iface->clear(b.ctx, 0, &err), BP_OK);
  EXPECT_EQ(user[15], 0.0f);
  b.iface->free(b.ctx);  // must not free |user| (ASan would report a bad free)
  user[0] = 2.0f;
  EXPECT_EQ(p.dev.iface->buffer_from_host_ptr(p.dev.ctx, nullptr, 8, &b, &err), BP_ERR_INVALID_ARGUMENT);
}

TEST(CpuPluginAbi, BackendThreadsAndEvents) {
  loaded_plugin p(5);
  ASSERT_TRUE(p.ok());
  bool logged = false;
  for (auto &l : p.log.lines) {
    logged |= l == "5 threads";
    // The host prefixes each line with the plugin's name (PLG-13); a line
    // that does too reads "cpu: cpu: ...".
    EXPECT_NE(l.rfind("cpu:", 0), 0u) << l;
  }
  EXPECT_TRUE(logged);
  EXPECT_TRUE(p.backend.iface->supports_buft(p.backend.ctx, p.dev.iface->buffer_type(p.dev.ctx)));

  bp_error err{};
  bp_backend_ref be{};
  bp_param_value bad{"threads", BP_PARAM_INT, 1000, "1000"};
  EXPECT_EQ(p.dev.iface->backend_init(p.dev.ctx, &bad, 1, &be, &err), BP_ERR_INVALID_ARGUMENT);
  bp_param_value zero{"threads", BP_PARAM_INT, 0, "0"};
  ASSERT_EQ(p.dev.iface->backend_init(p.dev.ctx, &zero, 1, &be, &err), BP_OK) << err.message;
  be.iface->free(be.ctx);

  bp_event_ref ev{};
  ASSERT_EQ(p.dev.iface->event_new(p.dev.ctx, &ev, &err), BP_OK);
  EXPECT_EQ(p.backend.iface->event_record(p.backend.ctx, ev.ctx, &err), BP_OK);
  EXPECT_EQ(p.backend.iface->event_wait(p.backend.ctx, ev.ctx, &err), BP_OK);
  EXPECT_EQ(ev.iface->synchronize(ev.ctx, &err), BP_OK);
  ev.iface->free(ev.ctx);
}

TEST(CpuPluginAbi, ManyBackendsComeAndGo) {
  loaded_plugin p(-1);
  ASSERT_TRUE(p.iface);
  for (int i = 0; i < 20; ++i) {
    bp_backend_ref be{};
    bp_error err{};
    bp_param_value v{"threads", BP_PARAM_INT, 4, "4"};
    ASSERT_EQ(p.dev.iface->backend_init(p.dev.ctx, &v, 1, &be, &err), BP_OK);
    be.iface->free(be.ctx);
  }
}
