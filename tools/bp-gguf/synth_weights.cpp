// synth_weights.cpp: the values of bp-gguf synth's tensors. Each value comes
// from a counter-based generator (splitmix64 of a key made from the seed and
// the tensor's name, plus the element's index), so a tensor's bytes are the
// same for any thread count and on any platform: no libm in the draw. A draw
// sums four 16-bit uniforms (Irwin-Hall), scaled to variance 1: close enough
// to a normal for random weights, bounded at +/- 3.46.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "synth.hpp"

namespace bp::gguf_tool {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of |name|, mixed with |seed|.
uint64_t tensor_key(uint64_t seed, const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return splitmix64(h ^ splitmix64(seed));
}

// Zero mean, unit variance: (sum of four U(0,1) - 2) * sqrt(3).
float draw(uint64_t key, uint64_t i) {
  const uint64_t h = splitmix64(key + i * 0xd1b54a32d192ed03ull);
  float sum = 0;
  for (int k = 0; k < 4; ++k) sum += (static_cast<float>((h >> (16 * k)) & 0xffffu) + 0.5f) * (1.0f / 65536.0f);
  return (sum - 2.0f) * 1.7320508f;
}

}  // namespace

bool synth_tensor_bytes(uint64_t seed, const std::string &name, synth_fill fill, bp_type type, int64_t n_per_row,
                        int64_t rows, uint8_t *out) {
  const size_t row_bytes = bp_type_row_size(type, n_per_row);
  const uint64_t key = tensor_key(seed, name);
  // Chunks of about 64K values, taken by the threads in turn.
  const int64_t chunk_rows = std::max<int64_t>(1, 65536 / n_per_row);
  const int64_t n_chunks = (rows + chunk_rows - 1) / chunk_rows;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    std::vector<float> buf(static_cast<size_t>(chunk_rows * n_per_row));
    for (int64_t c; (c = next.fetch_add(1)) < n_chunks && !failed.load();) {
      const int64_t r0 = c * chunk_rows, nr = std::min(chunk_rows, rows - r0);
      const uint64_t base = static_cast<uint64_t>(r0 * n_per_row);
      for (int64_t i = 0; i < nr * n_per_row; ++i) buf[i] = fill.mean + fill.std * draw(key, base + i);
      if (bp_quantize_rows(type, buf.data(), out + row_bytes * r0, nr, n_per_row, nullptr) != BP_OK) failed = true;
    }
  };
  const int64_t n_threads =
      std::min<int64_t>(n_chunks, std::max(1u, std::min(std::thread::hardware_concurrency(), 32u)));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < n_threads; ++t) pool.emplace_back(work);
  work();
  for (auto &t : pool) t.join();
  return !failed;
}

std::vector<float> synth_rope_factors(int64_t head_dim, double base) {
  // As convert_hf_to_gguf.py computes LLaMA 3.1's rope_freqs.weight.
  const double factor = 8, low_freq_factor = 1, high_freq_factor = 4, old_ctx = 8192;
  const double low_freq_wavelen = old_ctx / low_freq_factor, high_freq_wavelen = old_ctx / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(i) / static_cast<double>(head_dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

}  // namespace bp::gguf_tool
