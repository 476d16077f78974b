// gguf_fuzz.cpp: libFuzzer target for the GGUF parser (gguf/parse.cpp), on
// bytes in memory. Built and run by scripts/test.sh in its sanitizer pass;
// by hand:
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined
//     -I include -I . tests/fuzz/gguf_fuzz.cpp gguf/parse.cpp -o gguf_fuzz
//   mkdir -p /tmp/gguf_new && ./gguf_fuzz -max_len=4096 -max_total_time=60 /tmp/gguf_new tests/fuzz/corpus/gguf
//
// (new inputs go to the first folder, so the committed seeds stay as they
// are). The seeds are small valid files; tests/gguf/corpus_test.cpp replays
// every file of the corpus, crash reproducers included (name them
// regress-<what>), through this same function in the ctest suite.
//
// The oracle: an input is refused with a message that starts "gguf: " and
// names a byte offset or the truncation, or it is accepted and then every
// string, value and tensor range the parser reported lies inside the input,
// tensor ranges are aligned and disjoint, and shapes are 1..4 positive
// dimensions. A violation aborts, which libFuzzer reports as a crash.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/parse.hpp"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool inside(uint64_t at, uint64_t n, size_t size) { return at <= size && n <= size - at; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bp::gguf::file_info info;
  std::string error;
  if (!bp::gguf::parse(data, size, info, error)) {
    require(error.rfind("gguf: ", 0) == 0);
    require(error.find("byte") != std::string::npos);
    return 0;
  }
  require(error.empty());
  require(info.version == 2 || info.version == 3);
  require(info.alignment > 0 && info.alignment % 8 == 0);
  require(info.data_offset % info.alignment == 0);
  for (const bp::gguf::kv &v : info.kvs) {
    require(!v.key.empty() && bp::gguf::valid_utf8(v.key.data(), v.key.size()));
    const uint32_t k = v.kind == bp::gguf::KIND_ARRAY ? v.elem_kind : v.kind;
    require(k < bp::gguf::KIND_COUNT && k != bp::gguf::KIND_ARRAY);
    if (k == bp::gguf::KIND_STRING) {
      require(v.strings.size() == v.count);
      for (uint64_t i = 0; i < v.count; ++i) {
        require(inside(v.strings[i], 8, size));
        const char *p = nullptr;
        uint64_t n = 0;
        bp::gguf::string_at(data, v, i, &p, &n);
        require(inside(v.strings[i] + 8, n, size));
      }
    } else {
      require(inside(v.value_offset, v.count * bp::gguf::kind_size(k), size));
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const bp::gguf::tensor_info &t : info.tensors) {
    require(t.n_dims >= 1 && t.n_dims <= 4);
    for (int d = 0; d < 4; ++d) require(t.ne[d] >= 1);
    const bp::gguf::tensor_type *tt = bp::gguf::find_tensor_type(t.type);
    require(tt != nullptr && t.ne[0] % tt->block == 0);
    require(t.offset % info.alignment == 0);
    require(inside(info.data_offset + t.offset, t.nbytes, size));
    ranges.emplace_back(t.offset, t.offset + t.nbytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) require(ranges[i - 1].second <= ranges[i].first);
  return 0;
}
