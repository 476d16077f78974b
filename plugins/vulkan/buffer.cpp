// buffer.cpp: memory and buffers. VkDeviceMemory is allocated in large
// blocks and sub-allocated first-fit (big requests get their own
// allocation); every Backplane buffer is one VkBuffer bound inside a block,
// with whole-buffer texel views made once here so recording never creates
// descriptors or views. Two buffer types per device: device-local (the
// default) and host-visible (the host_buffer_type, for staging).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "buffer_slots.hpp"
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

// The transport of plugins::buffer_slots: mapped memory directly, device
// memory through a staging buffer or a one-off command buffer; every call
// waits for the work queued on the device first.
struct vk_transport {
  using buffer = vk_buffer;
  using type_ctx = buffer_type_ctx;
  static constexpr const char *default_name = "Vulkan";
  static constexpr size_t default_alignment = 64;
  static constexpr const char *copy_where = "within one device";

  static vk_buffer *as_buffer(void *buf) { return static_cast<vk_buffer *>(buf); }
  static bp_status alive(vk_buffer *b, bp_error *err) { return device_check(b->dev, err); }
  static plugins::memory_window window(const vk_buffer *b) { return {static_cast<const char *>(b->base), b->size}; }
  static void destroy(vk_buffer *b) { buffer_destroy(b); }
  static bp_status write(vk_buffer *b, const bp_tensor *, size_t at, const void *data, size_t size, bp_error *err) {
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    if (!b->mapped) return staged_copy(b, at, const_cast<void *>(data), size, true, err);
    std::memcpy(b->mapped + at, data, size);
    return BP_OK;
  }
  static bp_status read(vk_buffer *b, const bp_tensor *, size_t at, void *data, size_t size, bp_error *err) {
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    if (!b->mapped) return staged_copy(b, at, data, size, false, err);
    std::memcpy(data, b->mapped + at, size);
    return BP_OK;
  }
  static bp_status fill(vk_buffer *b, const bp_tensor *, size_t at, uint8_t value, size_t size, bp_error *err) {
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    if (!b->mapped) {
      std::vector<uint8_t> bytes(size, value);
      return staged_copy(b, at, bytes.data(), size, true, err);
    }
    std::memset(b->mapped + at, value, size);
    return BP_OK;
  }
  static bp_status clear(vk_buffer *b, uint8_t value, bp_error *err) {
    if (bp_status s = device_wait_all(b->dev, err); s != BP_OK) return s;
    if (b->mapped) {
      std::memset(b->mapped, value, b->size);
      return BP_OK;
    }
    const uint32_t word = value * 0x01010101u;
    return device_run_once(
        b->dev, [&](VkCommandBuffer cb) { vkCmdFillBuffer(cb, b->buffer, 0, VK_WHOLE_SIZE, word); }, err);
  }
  static vk_buffer *source_of(const bp_tensor *src) { return static_cast<vk_buffer *>(src->buffer_ctx); }
  static bool same_memory(const vk_buffer *src, const vk_buffer *dst) { return src->dev == dst->dev; }
  static bp_status copy(vk_buffer *src, size_t src_at, vk_buffer *dst, size_t dst_at, size_t n, const bp_tensor *,
                        bp_error *err) {
    if (bp_status s = device_wait_all(dst->dev, err); s != BP_OK) return s;
    VkBufferCopy region{src_at, dst_at, n};
    return device_run_once(
        dst->dev, [&](VkCommandBuffer cb) { vkCmdCopyBuffer(cb, src->buffer, dst->buffer, 1, &region); }, err);
  }

  static const char *name(const buffer_type_ctx *t) { return t->name.c_str(); }
  static bp_status alloc(buffer_type_ctx *t, size_t size, vk_buffer **out, bp_error *err) {
    if (bp_status s = device_open(t->dev, err); s != BP_OK) return s;
    if (bp_status s = buffer_create(t->dev, size, t->host, out, err); s != BP_OK) return s;
    (*out)->type = t;
    return BP_OK;
  }
  static size_t alignment(const buffer_type_ctx *t) {
    const VkPhysicalDeviceLimits &l = t->dev->props.limits;
    // 16 at least: the texel paths address tensors in whole RGBA32F texels.
    return std::max<size_t>({64, l.minStorageBufferOffsetAlignment, l.minTexelBufferOffsetAlignment});
  }
  static size_t max_size(const buffer_type_ctx *t) {
    auto m3 =
        vk_struct<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &m3, {}};
    vkGetPhysicalDeviceProperties2(t->dev->phys, &p2);
    return static_cast<size_t>(m3.maxMemoryAllocationSize);
  }
  static bool is_host(const buffer_type_ctx *t) { return t->host; }
};

using slots = plugins::buffer_slots<vk_transport>;

}  // namespace

const bp_buffer_type_i &buffer_type_iface = slots::type_table;

}  // namespace bp::vk
