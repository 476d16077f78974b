// parse.hpp: the GGUF parser, on bytes in memory (a mapping or a buffer).
//
// It depends on the C++ standard library only, so the libFuzzer target
// (tests/fuzz/gguf_fuzz.cpp) compiles it alone. Nothing is trusted: every
// count, length, offset, dimension and type is checked before it is used,
// with overflow-checked arithmetic, and no byte outside [data, data + size)
// is read. A refusal names the field and its byte offset in the file
// (docs/gguf.md lists the rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bp::gguf {

// Metadata value kinds, with the numbers the file format gives them.
enum value_kind : uint32_t {
  KIND_U8 = 0,
  KIND_I8 = 1,
  KIND_U16 = 2,
  KIND_I16 = 3,
  KIND_U32 = 4,
  KIND_I32 = 5,
  KIND_F32 = 6,
  KIND_BOOL = 7,
  KIND_STRING = 8,
  KIND_ARRAY = 9,
  KIND_U64 = 10,
  KIND_I64 = 11,
  KIND_F64 = 12,
  KIND_COUNT = 13
};

// "u8", "string", "array", ... or nullptr for an unknown kind.
const char *kind_name(uint32_t kind);
// Bytes of one value of a fixed-size kind; 0 for string, array and unknown.
size_t kind_size(uint32_t kind);

// A tensor data type of the file format (its numeric id), known or not to
// Backplane: the block of elements it packs and the bytes of one block.
struct tensor_type {
  const char *name;  // "f32", "q4_0", ...
  uint32_t block;    // elements per block
  uint32_t bytes;    // bytes per block
};
// The traits of file type id |id|, or nullptr for an id the format does not define.
const tensor_type *find_tensor_type(uint32_t id);

struct kv {
  std::string key;
  uint32_t kind = 0;          // value_kind
  uint32_t elem_kind = 0;     // arrays: the elements' kind
  uint64_t count = 1;         // arrays: elements; 1 for a scalar
  uint64_t key_offset = 0;    // byte of the key's length field (for messages)
  uint64_t value_offset = 0;  // byte of the value (arrays: of the first element)
  // Strings (a scalar string, or each element of a string array): the byte
  // of each string's length field.
  std::vector<uint64_t> strings;
};

struct tensor_info {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint32_t type = 0;         // file type id (find_tensor_type knows it)
  uint64_t offset = 0;       // from the start of the data section
  uint64_t nbytes = 0;       // bytes of its data
  uint64_t info_offset = 0;  // byte of its entry in the tensor infos
};

struct file_info {
  uint32_t version = 0;
  uint64_t alignment = 32;   // general.alignment, else 32
  uint64_t data_offset = 0;  // start of the data section in the file
  uint64_t data_size = 0;    // bytes from data_offset to the end of the file
  std::vector<kv> kvs;
  std::vector<tensor_info> tensors;
};

// Parses the |size| bytes at |data|. On success fills |out| and returns
// true; otherwise sets |error| ("gguf: <field> at byte N: <cause>; <fix>")
// and returns false. Borrows |data| for the call only.
bool parse(const uint8_t *data, size_t size, file_info &out, std::string &error);

// Reads string |which| of |v| (a string or a string array) from |data|
// (the bytes parse() accepted): pointer and length, not NUL-terminated.
void string_at(const uint8_t *data, const kv &v, uint64_t which, const char **ptr, uint64_t *len);

// True when |s| of |n| bytes is well-formed UTF-8 (no overlongs, no
// surrogates, nothing past U+10FFFF).
bool valid_utf8(const char *s, size_t n);

}  // namespace bp::gguf
