// buffer.cpp: memory and buffers. VkDeviceMemory is allocated in large
// blocks and sub-allocated first-fit (big requests get their own
// allocation); every Backplane buffer is one VkBuffer bound inside a block,
// with whole-buffer texel views made once here so recording never creates
// descriptors or views. Two buffer types per device: device-local (the
// default) and host-visible (the host_buffer_type, for staging).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "backplane/plugin_guard.hpp"
#include "vulkan.hpp"

namespace bp::vk {

// ---- memory_allocator -------------------------------------------------------

bp_status memory_allocator::alloc(const VkMemoryRequirements &req, allocation *out, bp_error *err) {
  if (!(req.memoryTypeBits & (1u << type_index)))
    return bp_error_setf(err, BP_ERR_INTERNAL, "buffer cannot live in memory type %u", type_index);
  auto allocate_block = [&](VkDeviceSize size, bool dedicated, memory_block **made) -> bp_status {
    auto blk = std::make_unique<memory_block>();
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, nullptr, size, type_index};
    VkResult r = vkAllocateMemory(dev->dev, &ai, nullptr, &blk->memory);
    if (r != VK_SUCCESS) {
      if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        return bp_error_setf(err, BP_ERR_OUT_OF_DEVICE_MEMORY,
                             "out of device memory allocating %llu bytes on '%s' (%s)",
                             static_cast<unsigned long long>(size), dev->name.c_str(), vk_result_name(r));
      return device_fail(dev, r, "vkAllocateMemory", err);
    }
    if (mappable) {
      void *p = nullptr;
      r = vkMapMemory(dev->dev, blk->memory, 0, VK_WHOLE_SIZE, 0, &p);
      if (r != VK_SUCCESS) {
        vkFreeMemory(dev->dev, blk->memory, nullptr);
        return device_fail(dev, r, "vkMapMemory", err);
      }
      blk->mapped = static_cast<char *>(p);
    }
    blk->size = size;
    blk->dedicated = dedicated;
    if (!dedicated) blk->free[0] = size;
    *made = blk.get();
    blocks.push_back(std::move(blk));
    return BP_OK;
  };
  std::lock_guard<std::mutex> lock(mu);
  if (req.size > block_size / 2) {
    memory_block *blk = nullptr;
    if (bp_status st = allocate_block(req.size, true, &blk); st != BP_OK) return st;
    *out = allocation{blk, 0, req.size};
    return BP_OK;
  }
  const VkDeviceSize align = std::max<VkDeviceSize>(req.alignment, 16);
  for (int pass = 0; pass < 2; ++pass) {
    for (auto &blk : blocks) {
      if (blk->dedicated) continue;
      for (auto it = blk->free.begin(); it != blk->free.end(); ++it) {
        const VkDeviceSize start = (it->first + align - 1) / align * align;
        const VkDeviceSize end = it->first + it->second;
        if (start + req.size > end) continue;
        const VkDeviceSize head = start - it->first, tail = end - (start + req.size);
        const VkDeviceSize free_at = it->first;
        blk->free.erase(it);
        if (head) blk->free[free_at] = head;
        if (tail) blk->free[start + req.size] = tail;
        *out = allocation{blk.get(), start, req.size};
        return BP_OK;
      }
    }
    if (pass == 0) {
      memory_block *blk = nullptr;
      if (bp_status st = allocate_block(block_size, false, &blk); st != BP_OK) return st;
    }
  }
  return bp_error_setf(err, BP_ERR_INTERNAL, "sub-allocation of %llu bytes failed",
                       static_cast<unsigned long long>(req.size));
}

void memory_allocator::release(const allocation &a) {
  if (!a.block) return;
  std::lock_guard<std::mutex> lock(mu);
  memory_block *blk = a.block;
  bool drop = blk->dedicated;
  if (!blk->dedicated) {
    auto it = blk->free.emplace(a.offset, a.size).first;
    auto next = std::next(it);
    if (next != blk->free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      blk->free.erase(next);
    }
    if (it != blk->free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        blk->free.erase(it);
      }
    }
    // An empty block goes back to the driver: memory is not hoarded.
    drop = blk->free.size() == 1 && blk->free.begin()->second == blk->size;
  }
  if (!drop) return;
  vkFreeMemory(dev->dev, blk->memory, nullptr);
  blocks.erase(std::remove_if(blocks.begin(), blocks.end(), [&](const auto &p) { return p.get() == blk; }),
               blocks.end());
}

void memory_allocator::destroy_all() {
  std::lock_guard<std::mutex> lock(mu);
  for (auto &blk : blocks) vkFreeMemory(dev->dev, blk->memory, nullptr);
  blocks.clear();
}

// ---- vk_buffer --------------------------------------------------------------

namespace {

VkBufferView make_view(device_state *dev, VkBuffer buf, VkFormat fmt, VkDeviceSize texel, VkDeviceSize size) {
  const VkDeviceSize texels = size / texel;
  if (texels == 0 || texels > dev->props.limits.maxTexelBufferElements) return VK_NULL_HANDLE;
  VkBufferViewCreateInfo vi{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO, nullptr, 0, buf, fmt, 0, texels * texel};
  VkBufferView v = VK_NULL_HANDLE;
  if (vkCreateBufferView(dev->dev, &vi, nullptr, &v) != VK_SUCCESS) return VK_NULL_HANDLE;
  return v;
}

}  // namespace

bp_status buffer_create(device_state *dev, size_t size, bool host, vk_buffer **out, bp_error *err) {
  *out = nullptr;
  auto m3 =
      vk_struct<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &m3, {}};
  vkGetPhysicalDeviceProperties2(dev->phys, &p2);
  if (size > m3.maxMemoryAllocationSize)
    return bp_error_setf(err, BP_ERR_OUT_OF_DEVICE_MEMORY,
                         "%zu bytes is more than one allocation may hold on '%s' (maxMemoryAllocationSize %llu)", size,
                         dev->name.c_str(), static_cast<unsigned long long>(m3.maxMemoryAllocationSize));
  auto b = std::make_unique<vk_buffer>();
  b->dev = dev;
  b->size = size;
  b->vk_size = std::max<size_t>(16, (size + 15) / 16 * 16);
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                                   VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBufferCreateInfo bci{
      VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, nullptr, 0, b->vk_size, usage, VK_SHARING_MODE_EXCLUSIVE, 0, nullptr};
  VkResult r = vkCreateBuffer(dev->dev, &bci, nullptr, &b->buffer);
  if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreateBuffer", err);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev->dev, b->buffer, &req);
  memory_allocator &ma = host ? dev->host_mem : dev->device_mem;
  b->allocator = &ma;
  if (bp_status st = ma.alloc(req, &b->mem, err); st != BP_OK) {
    vkDestroyBuffer(dev->dev, b->buffer, nullptr);
    return st;
  }
  r = vkBindBufferMemory(dev->dev, b->buffer, b->mem.block->memory, b->mem.offset);
  if (r != VK_SUCCESS) {
    ma.release(b->mem);
    vkDestroyBuffer(dev->dev, b->buffer, nullptr);
    return device_fail(dev, r, "vkBindBufferMemory", err);
  }
  if (b->mem.block->mapped) {
    b->mapped = b->mem.block->mapped + b->mem.offset;
    b->base = b->mapped;
  } else {
    // Device memory has no host address, but tensors need distinct non-NULL
    // data pointers: reserve (never touch) an address range of the size.
    void *p = mmap(nullptr, b->vk_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      ma.release(b->mem);
      vkDestroyBuffer(dev->dev, b->buffer, nullptr);
      return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "cannot reserve %zu bytes of address space", b->vk_size);
    }
    b->base = p;
    b->reserved_base = true;
  }
  b->view_f32 = make_view(dev, b->buffer, VK_FORMAT_R32G32B32A32_SFLOAT, 16, b->vk_size);
  if (dev->f16_view) b->view_f16 = make_view(dev, b->buffer, VK_FORMAT_R16G16B16A16_SFLOAT, 8, b->vk_size);
  // Quantized weights are read as words through texel fetches: lavapipe
  // turns a storage-buffer load at a per-invocation address into a loop over
  // the lanes, a texel fetch into one gather (docs/plugins/vulkan.md).
  b->view_u32 = make_view(dev, b->buffer, VK_FORMAT_R32_UINT, 4, b->vk_size);
  *out = b.release();
  return BP_OK;
}

void buffer_destroy(vk_buffer *b) {
  if (!b) return;
  device_state *dev = b->dev;
  device_wait_all(dev, nullptr);  // work still queued may use it
  if (b->view_f32) vkDestroyBufferView(dev->dev, b->view_f32, nullptr);
  if (b->view_f16) vkDestroyBufferView(dev->dev, b->view_f16, nullptr);
  if (b->view_u32) vkDestroyBufferView(dev->dev, b->view_u32, nullptr);
  vkDestroyBuffer(dev->dev, b->buffer, nullptr);
  b->allocator->release(b->mem);
  if (b->reserved_base) munmap(b->base, b->vk_size);
  delete b;
}

bool is_our_buffer(const bp_tensor *t) {
  if (!t || !t->buffer_ctx || !t->data || !t->buffer) return false;
  return true;
}

namespace {

// The device's liveness first, then the shared range check.
bp_status check_range(vk_buffer *b, const bp_tensor *t, size_t offset, size_t size, const char *what, bp_error *err) {
  if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s needs a buffer", what);
  if (bp_status s = device_check(b->dev, err); s != BP_OK) return s;
  return plugins::window_check({static_cast<const char *>(b->base), b->size}, t, offset, size, what, err);
}

// Copies between host memory and bytes [at, at+size) of |b| through a
// host-visible staging buffer (device memory that cannot be mapped).
bp_status staged_copy(vk_buffer *b, size_t at, void *host, size_t size, bool to_device, bp_error *err) {
  vk_buffer *st = nullptr;
  if (bp_status s = buffer_create(b->dev, size, true, &st, err); s != BP_OK) return s;
  if (to_device) std::memcpy(st->mapped, host, size);
  VkBufferCopy region{to_device ? 0 : at, to_device ? at : 0, size};
  bp_status s = device_run_once(
      b->dev,
      [&](VkCommandBuffer cb) {
        vkCmdCopyBuffer(cb, to_device ? st->buffer : b->buffer, to_device ? b->buffer : st->buffer, 1, &region);
      },
      err);
  if (s == BP_OK && !to_device) std::memcpy(host, st->mapped, size);
  buffer_destroy(st);
  return s;
}

void buffer_free(void *buf) noexcept { buffer_destroy(static_cast<vk_buffer *>(buf)); }

void *buffer_base(void *buf) noexcept { return buf ? static_cast<vk_buffer *>(buf)->base : nullptr; }

bp_status buffer_set_tensor(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *b = static_cast<vk_buffer *>(buf);
    if (bp_status s = check_range(b, t, offset, size, "set_tensor", err); s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "set_tensor with NULL data");
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    const size_t at = tensor_offset(t) + offset;
    if (b->mapped) {
      std::memcpy(b->mapped + at, data, size);
      return BP_OK;
    }
    return staged_copy(b, at, const_cast<void *>(data), size, true, err);
  });
}

bp_status buffer_get_tensor(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *b = static_cast<vk_buffer *>(buf);
    if (bp_status s = check_range(b, t, offset, size, "get_tensor", err); s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "get_tensor with NULL data");
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    const size_t at = tensor_offset(t) + offset;
    if (b->mapped) {
      std::memcpy(data, b->mapped + at, size);
      return BP_OK;
    }
    return staged_copy(b, at, data, size, false, err);
  });
}

bp_status buffer_memset_tensor(void *buf, bp_tensor *t, uint8_t value, size_t offset, size_t size,
                               bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *b = static_cast<vk_buffer *>(buf);
    if (bp_status s = check_range(b, t, offset, size, "memset_tensor", err); s != BP_OK || size == 0) return s;
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    const size_t at = tensor_offset(t) + offset;
    if (b->mapped) {
      std::memset(b->mapped + at, value, size);
      return BP_OK;
    }
    std::vector<uint8_t> bytes(size, value);
    return staged_copy(b, at, bytes.data(), size, true, err);
  });
}

bp_status buffer_copy_tensor(void *buf, const bp_tensor *src, bp_tensor *dst, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *db = static_cast<vk_buffer *>(buf);
    if (!db) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "copy_tensor needs a buffer");
    auto *sb = src ? static_cast<vk_buffer *>(src->buffer_ctx) : nullptr;
    if (bp_status s = plugins::copy_precondition(sb && sb->dev == db->dev, src, dst, "within one device", err);
        s != BP_OK)
      return s;
    const size_t n = bp_tensor_nbytes(src);
    if (bp_status s = check_range(db, dst, 0, n, "copy_tensor", err); s != BP_OK || n == 0) return s;
    if (bp_status s = device_wait_all(db->dev, err); s != BP_OK) return s;
    VkBufferCopy region{tensor_offset(src), tensor_offset(dst), n};
    return device_run_once(
        db->dev, [&](VkCommandBuffer cb) { vkCmdCopyBuffer(cb, sb->buffer, db->buffer, 1, &region); }, err);
  });
}

bp_status buffer_clear(void *buf, uint8_t value, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *b = static_cast<vk_buffer *>(buf);
    if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "clear needs a buffer");
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    if (b->mapped) {
      std::memset(b->mapped, value, b->size);
      return BP_OK;
    }
    const uint32_t word = value * 0x01010101u;
    return device_run_once(
        b->dev, [&](VkCommandBuffer cb) { vkCmdFillBuffer(cb, b->buffer, 0, VK_WHOLE_SIZE, word); }, err);
  });
}

const char *buft_name(void *buft) noexcept {
  auto *t = static_cast<buffer_type_ctx *>(buft);
  return t ? t->name.c_str() : "Vulkan";
}

bp_status buft_alloc(void *buft, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *t = static_cast<buffer_type_ctx *>(buft);
    if (!t || !out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "alloc needs a buffer type and an out ref");
    out->iface = nullptr;
    out->ctx = nullptr;
    if (bp_status s = device_open(t->dev, err); s != BP_OK) return s;
    vk_buffer *b = nullptr;
    if (bp_status s = buffer_create(t->dev, size, t->host, &b, err); s != BP_OK) return s;
    b->type = t;
    out->iface = &buffer_iface;
    out->ctx = b;
    return BP_OK;
  });
}

size_t buft_alignment(void *buft) noexcept {
  auto *t = static_cast<buffer_type_ctx *>(buft);
  if (!t) return 64;
  const VkPhysicalDeviceLimits &l = t->dev->props.limits;
  // 16 at least: the texel paths address tensors in whole RGBA32F texels.
  return std::max<size_t>({64, l.minStorageBufferOffsetAlignment, l.minTexelBufferOffsetAlignment});
}

size_t buft_max_size(void *buft) noexcept {
  auto *t = static_cast<buffer_type_ctx *>(buft);
  if (!t) return SIZE_MAX;
  auto m3 =
      vk_struct<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &m3, {}};
  vkGetPhysicalDeviceProperties2(t->dev->phys, &p2);
  return static_cast<size_t>(m3.maxMemoryAllocationSize);
}

int buft_is_host(void *buft) noexcept {
  auto *t = static_cast<buffer_type_ctx *>(buft);
  return t && t->host ? 1 : 0;
}

}  // namespace

const bp_buffer_i buffer_iface = {
    sizeof(bp_buffer_i),
    buffer_free,
    buffer_base,
    nullptr,  // init_tensor: tensors need no per-tensor state
    buffer_set_tensor,
    buffer_get_tensor,
    buffer_memset_tensor,
    buffer_copy_tensor,
    buffer_clear,
    nullptr,  // reset
    nullptr,  // set_usage
};

const bp_buffer_type_i buffer_type_iface = {
    sizeof(bp_buffer_type_i), buft_name, buft_alloc, buft_alignment, buft_max_size, nullptr, buft_is_host,
};

}  // namespace bp::vk
