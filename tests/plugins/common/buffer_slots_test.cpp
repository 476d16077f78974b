// buffer_slots_test.cpp: the slot bodies every device plugin shares
// (plugins/common/buffer_slots.hpp, and device_slots / event_slots in
// plugin_common.hpp), around a fake transport that records what reaches it:
// the liveness check runs first, nothing outside the buffer reaches the
// transport, and the transport gets the byte offset inside the buffer.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/common/buffer_slots.hpp"
#include "plugins/common/plugin_common.hpp"

namespace {

struct fake_buffer {
  char bytes[64] = {};
  const char *base = bytes;
  size_t size = sizeof bytes;
  bool lost = false;
};

std::vector<std::string> calls;  // what reached the transport, in order

struct fake_transport {
  using buffer = fake_buffer;
  using type_ctx = int;
  static constexpr const char *default_name = "Fake";
  static constexpr size_t default_alignment = 32;
  static constexpr const char *copy_where = "within the fake device";

  static fake_buffer *as_buffer(void *buf) { return static_cast<fake_buffer *>(buf); }
  static bp_status alive(fake_buffer *b, bp_error *err) {
    calls.push_back("alive");
    return b->lost ? bp_error_set(err, BP_ERR_DEVICE_LOST, "the fake device was lost") : BP_OK;
  }
  static bp::plugins::memory_window window(const fake_buffer *b) { return {b->base, b->size}; }
  static void destroy(fake_buffer *) { calls.push_back("destroy"); }
  static bp_status write(fake_buffer *, const bp_tensor *, size_t at, const void *, size_t size, bp_error *) {
    calls.push_back("write " + std::to_string(at) + " " + std::to_string(size));
    return BP_OK;
  }
  static bp_status read(fake_buffer *, const bp_tensor *, size_t at, void *, size_t size, bp_error *) {
    calls.push_back("read " + std::to_string(at) + " " + std::to_string(size));
    return BP_OK;
  }
  static bp_status fill(fake_buffer *, const bp_tensor *, size_t at, uint8_t, size_t size, bp_error *) {
    calls.push_back("fill " + std::to_string(at) + " " + std::to_string(size));
    return BP_OK;
  }
  static bp_status clear(fake_buffer *, uint8_t, bp_error *) {
    calls.push_back("clear");
    return BP_OK;
  }
  static fake_buffer *source_of(const bp_tensor *src) { return static_cast<fake_buffer *>(src->buffer_ctx); }
  static bool same_memory(const fake_buffer *, const fake_buffer *) { return true; }
  static bp_status copy(fake_buffer *, size_t src_at, fake_buffer *, size_t dst_at, size_t n, const bp_tensor *,
                        bp_error *) {
    calls.push_back("copy " + std::to_string(src_at) + " " + std::to_string(dst_at) + " " + std::to_string(n));
    return BP_OK;
  }
  static const char *name(const int *) { return "Fake0"; }
  static bp_status alloc(int *, size_t size, fake_buffer **out, bp_error *) {
    *out = new fake_buffer();
    (*out)->size = size < 64 ? size : 64;
    return BP_OK;
  }
  static size_t alignment(const int *) { return 64; }
  static size_t max_size(const int *) { return 64; }
  static bool is_host(const int *) { return false; }
};

using slots = bp::plugins::buffer_slots<fake_transport>;

bp_tensor f32_at(fake_buffer &b, size_t at, int64_t n, const char *name) {
  bp_tensor t{};
  t.type = BP_TYPE_F32;
  t.ne[0] = n;
  t.ne[1] = t.ne[2] = t.ne[3] = 1;
  t.nb[0] = 4;
  t.nb[1] = t.nb[2] = t.nb[3] = 4 * static_cast<size_t>(n);
  t.data = b.bytes + at;
  t.buffer_ctx = &b;
  std::snprintf(t.name, sizeof t.name, "%s", name);
  return t;
}

TEST(PluginBufferSlots, TheTransportGetsTheByteOffsetInsideTheBuffer) {
  calls.clear();
  fake_buffer b;
  bp_tensor t = f32_at(b, 16, 8, "x");
  char data[8] = {};
  bp_error err{};
  EXPECT_EQ(slots::buffer_table.set_tensor(&b, &t, data, 4, 8, &err), BP_OK);
  EXPECT_EQ(slots::buffer_table.get_tensor(&b, &t, data, 0, 8, &err), BP_OK);
  EXPECT_EQ(slots::buffer_table.memset_tensor(&b, &t, 0, 8, 4, &err), BP_OK);
  EXPECT_EQ(slots::buffer_table.clear(&b, 0, &err), BP_OK);
  EXPECT_EQ(calls, (std::vector<std::string>{"alive", "write 20 8", "alive", "read 16 8", "alive", "fill 24 4", "alive",
                                             "clear"}));
}

TEST(PluginBufferSlots, LivenessComesFirstAndNothingOutsideTheBufferIsSent) {
  calls.clear();
  fake_buffer b;
  bp_tensor t = f32_at(b, 16, 8, "x");
  char data[64] = {};
  bp_error err{};
  b.lost = true;
  EXPECT_EQ(slots::buffer_table.set_tensor(&b, &t, data, 1000, 8, &err), BP_ERR_DEVICE_LOST);
  EXPECT_STREQ(err.message, "the fake device was lost");
  b.lost = false;
  EXPECT_EQ(slots::buffer_table.set_tensor(&b, &t, data, 40, 16, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "set_tensor of 16 bytes at offset 40 of tensor 'x' leaves its buffer");
  EXPECT_EQ(slots::buffer_table.get_tensor(&b, &t, nullptr, 0, 8, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "get_tensor with NULL data");
  EXPECT_EQ(slots::buffer_table.set_tensor(nullptr, &t, data, 0, 8, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "set_tensor needs a buffer");
  EXPECT_EQ(calls, (std::vector<std::string>{"alive", "alive", "alive"}));  // the transport saw none of them
}

TEST(PluginBufferSlots, CopyChecksBothRangesAndSaysWhatItCopies) {
  calls.clear();
  fake_buffer src, dst;
  bp_tensor s = f32_at(src, 0, 4, "s"), d = f32_at(dst, 32, 4, "d");
  bp_error err{};
  EXPECT_EQ(slots::buffer_table.copy_tensor(&dst, &s, &d, &err), BP_OK);
  EXPECT_EQ(calls.back(), "copy 0 32 16");
  bp_tensor wide = f32_at(src, 0, 8, "w");
  wide.type = BP_TYPE_F16;
  EXPECT_EQ(slots::buffer_table.copy_tensor(&dst, &wide, &d, &err), BP_ERR_UNIMPLEMENTED);
  EXPECT_STREQ(err.message, "copy_tensor copies contiguous tensors within the fake device");
  src.size = 8;  // the source tensor now leaves its buffer
  EXPECT_EQ(slots::buffer_table.copy_tensor(&dst, &s, &d, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(calls.back(), "alive");
}

TEST(PluginBufferSlots, TheTypeSlotsCheckTheirArgumentsAndHandOutTheSharedTable) {
  int dev = 0;
  bp_buffer_ref out{&slots::buffer_table, &dev};
  bp_error err{};
  EXPECT_EQ(slots::type_table.alloc(nullptr, 16, &out, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "alloc needs a buffer type and an out ref");
  ASSERT_EQ(slots::type_table.alloc(&dev, 16, &out, &err), BP_OK);
  EXPECT_EQ(out.iface, &slots::buffer_table);
  EXPECT_EQ(slots::buffer_table.base(out.ctx), static_cast<fake_buffer *>(out.ctx)->bytes);
  delete static_cast<fake_buffer *>(out.ctx);
  EXPECT_STREQ(slots::type_table.name(&dev), "Fake0");
  EXPECT_STREQ(slots::type_table.name(nullptr), "Fake");
  EXPECT_EQ(slots::type_table.alignment(nullptr), 32u);
  EXPECT_EQ(slots::type_table.max_size(&dev), 64u);
  EXPECT_EQ(slots::type_table.is_host(&dev), 0);
}

// ---- async transfers --------------------------------------------------------

struct fake_backend {
  fake_buffer *reaches = nullptr;
  bool lost = false;
};

struct fake_queue {
  using backend = fake_backend;
  using buffer = fake_buffer;
  static constexpr const char *memory = "this backend's fake device";
  static bp_status alive(fake_backend *be, bp_error *err) {
    return be->lost ? bp_error_set(err, BP_ERR_DEVICE_LOST, "the fake device was lost") : BP_OK;
  }
  static fake_buffer *buffer_of(const bp_tensor *t) { return t ? static_cast<fake_buffer *>(t->buffer_ctx) : nullptr; }
  static bool reaches(const fake_backend *be, const fake_buffer *b) { return be->reaches == b; }
  static bp_status write(fake_backend *, fake_buffer *, size_t at, const void *, size_t size, bp_error *) {
    calls.push_back("write_async " + std::to_string(at) + " " + std::to_string(size));
    return BP_OK;
  }
  static bp_status read(fake_backend *, fake_buffer *, size_t at, void *, size_t size, bp_error *) {
    calls.push_back("read_async " + std::to_string(at) + " " + std::to_string(size));
    return BP_OK;
  }
};

using async = bp::plugins::async_transfer_slots<fake_queue>;

TEST(PluginAsyncTransferSlots, OnlyTensorsTheBackendReachesAreSent) {
  calls.clear();
  fake_buffer b, other;
  fake_backend be{&b};
  bp_tensor t = f32_at(b, 8, 4, "kv"), elsewhere = f32_at(other, 0, 4, "w");
  char data[16] = {};
  bp_error err{};
  EXPECT_EQ(async::set_async(&be, &t, data, 4, 8, &err), BP_OK);
  EXPECT_EQ(async::get_async(&be, &t, data, 0, 16, &err), BP_OK);
  EXPECT_EQ(async::set_async(&be, &elsewhere, data, 0, 4, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "async transfer of tensor 'w', which is not in memory of this backend's fake device");
  EXPECT_EQ(async::set_async(nullptr, &t, data, 0, 4, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "async transfer needs a backend");
  be.lost = true;
  EXPECT_EQ(async::get_async(&be, &t, data, 0, 4, &err), BP_ERR_DEVICE_LOST);
  EXPECT_EQ(calls, (std::vector<std::string>{"write_async 12 8", "read_async 8 16"}));
}

// ---- device and event slots -------------------------------------------------

struct fake_device_parts {
  using device = int;
  static bp::plugins::device_facts facts(int &) {
    return {"Fake", "a fake device", "fake-0", BP_DEVICE_TYPE_GPU, BP_DEVICE_CAP_EVENTS, 1024, 512};
  }
  static bp_status backend_init(int *, const bp_param_value *, uint32_t, bp_backend_ref *out, bp_error *) {
    return out->iface == nullptr && out->ctx == nullptr ? BP_OK : BP_ERR_INTERNAL;  // cleared before it runs
  }
  static bp_status event_new(int *, bp_event_ref *, bp_error *) { return BP_OK; }
  static bp_buffer_type_ref buffer_type(int &dev) { return bp_buffer_type_ref{&slots::type_table, &dev}; }
};

TEST(PluginDeviceSlots, ArgumentsCheckedAndOutsClearedBeforeThePluginsPart) {
  using dev_slots = bp::plugins::device_slots<fake_device_parts>;
  int dev = 0;
  bp_error err{};
  bp_device_props props{};
  props.struct_size = sizeof props;
  ASSERT_EQ(dev_slots::get_props(&dev, &props, &err), BP_OK);
  EXPECT_STREQ(props.name, "Fake");
  EXPECT_EQ(props.memory_free, 512u);
  EXPECT_EQ(dev_slots::get_props(nullptr, &props, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "get_props needs a device and an out struct");
  int junk = 0;
  bp_backend_ref be{nullptr, &junk};
  EXPECT_EQ(dev_slots::backend_init(&dev, nullptr, 0, &be, &err), BP_OK);
  EXPECT_EQ(dev_slots::event_new(&dev, nullptr, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "event_new needs a device and an out ref");
  constexpr bp_device_i table = dev_slots::table();
  EXPECT_EQ(table.struct_size, sizeof(bp_device_i));
  EXPECT_EQ(table.buffer_type(&dev).ctx, &dev);
  EXPECT_EQ(table.host_buffer_type, nullptr);
  EXPECT_EQ(table.buffer_from_host_ptr, nullptr);
}

int events_freed = 0;
struct fake_event {
  ~fake_event() { ++events_freed; }
};
struct fake_event_parts {
  using backend = fake_backend;
  using event = fake_event;
  static bp_status alive(fake_backend *be, bp_error *err) { return fake_queue::alive(be, err); }
  static bp_status record(fake_backend *, fake_event *, bp_error *) { return BP_OK; }
  static bp_status wait(fake_backend *, fake_event *, bp_error *) { return BP_OK; }
  static bp_status synchronize(fake_event *, bp_error *) { return BP_OK; }
};

TEST(PluginEventSlots, BackendLivenessFirstAndFreeDeletesTheEvent) {
  using ev_slots = bp::plugins::event_slots<fake_event_parts>;
  fake_backend be;
  bp_error err{};
  EXPECT_EQ(ev_slots::record(&be, nullptr, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "event_record needs a backend and an event");
  auto *ev = new fake_event();
  be.lost = true;
  EXPECT_EQ(ev_slots::wait(&be, ev, &err), BP_ERR_DEVICE_LOST);
  EXPECT_EQ(ev_slots::table.synchronize(ev, &err), BP_OK);
  ev_slots::table.free(ev);
  ev_slots::table.free(nullptr);
  EXPECT_EQ(events_freed, 1);
}

}  // namespace
