// show.cpp: bp-gguf show: the file's version, metadata and tensors, with
// byte totals per type. Text abbreviates long arrays; JSON has them whole.
#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/text_table.hpp"
#include "gguf_tool.hpp"

namespace bp::gguf_tool {

namespace {

constexpr uint64_t kTextArrayItems = 8;  // elements shown before "... (N more)"

// A string value for text: printable ASCII kept, the rest escaped.
std::string quoted(const char *p, uint64_t n) {
  std::string s = "\"";
  for (uint64_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '"' || c == '\\') {
      s += '\\', s += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    }
  }
  return s + "\"";
}

// Element |e| of pair |i| as JSON.
nlohmann::json element_json(const bp_gguf *f, size_t i, uint64_t e, bp_gguf_kind kind) {
  switch (kind) {
    case BP_GGUF_STRING: {
      const char *p = nullptr;
      uint64_t n = 0;
      bp_gguf_kv_read_string(f, i, e, &p, &n);
      return std::string(p, n);
    }
    case BP_GGUF_F32:
    case BP_GGUF_F64: {
      double d = 0;
      bp_gguf_kv_read_float(f, i, e, &d);
      return d;
    }
    case BP_GGUF_BOOL: {
      int64_t v = 0;
      bp_gguf_kv_read_int(f, i, e, &v);
      return v != 0;
    }
    case BP_GGUF_U64: {
      uint64_t v = 0;
      bp_gguf_kv_read_uint(f, i, e, &v);
      return v;
    }
    default: {
      int64_t v = 0;
      bp_gguf_kv_read_int(f, i, e, &v);
      return v;
    }
  }
}

std::string element_text(const bp_gguf *f, size_t i, uint64_t e, bp_gguf_kind kind) {
  if (kind == BP_GGUF_STRING) {
    const char *p = nullptr;
    uint64_t n = 0;
    bp_gguf_kv_read_string(f, i, e, &p, &n);
    return quoted(p, n);
  }
  return element_json(f, i, e, kind).dump();
}

std::string shape_text(const bp_gguf_tensor_info &t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

}  // namespace

int show(const std::string &path, bool json) {
  bp_gguf *f = open_or_report(path);
  if (f == nullptr) return 1;
  nlohmann::json j;
  j["file"] = path;
  j["size"] = bp_gguf_file_size(f);
  j["version"] = bp_gguf_version(f);
  j["alignment"] = bp_gguf_alignment(f);
  j["data_offset"] = bp_gguf_data_offset(f);
  std::vector<std::vector<std::string>> kv_rows;
  nlohmann::json meta = nlohmann::json::array();
  for (size_t i = 0; i < bp_gguf_kv_count(f); ++i) {
    bp_gguf_value_info vi{};
    vi.struct_size = sizeof vi;
    bp_gguf_kv_describe(f, i, &vi);
    nlohmann::json m;
    m["key"] = bp_gguf_kv_key(f, i);
    std::string type = bp_gguf_kind_name(vi.elem_kind), text;
    if (vi.kind == BP_GGUF_ARRAY) {
      type += "[" + std::to_string(vi.count) + "]";
      nlohmann::json arr = nlohmann::json::array();
      if (json) {
        for (uint64_t e = 0; e < vi.count; ++e) arr.push_back(element_json(f, i, e, vi.elem_kind));
      } else {
        text = "[";
        for (uint64_t e = 0; e < vi.count && e < kTextArrayItems; ++e)
          text += (e ? ", " : "") + element_text(f, i, e, vi.elem_kind);
        if (vi.count > kTextArrayItems) text += ", ... (" + std::to_string(vi.count - kTextArrayItems) + " more)";
        text += "]";
      }
      m["value"] = arr;
    } else {
      m["value"] = element_json(f, i, 0, vi.kind);
      text = element_text(f, i, 0, vi.kind);
    }
    m["type"] = type;
    meta.push_back(m);
    kv_rows.push_back({bp_gguf_kv_key(f, i), type, text});
  }
  j["metadata"] = meta;

  std::vector<std::vector<std::string>> t_rows = {{"name", "type", "shape", "bytes", "offset"}};
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_type;  // type -> tensors, bytes
  uint64_t total = 0;
  for (size_t i = 0; i < bp_gguf_tensor_count(f); ++i) {
    bp_gguf_tensor_info t{};
    t.struct_size = sizeof t;
    bp_gguf_tensor_describe(f, i, &t);
    std::string type = t.type_name;
    if (!t.supported) type += " (not loadable)";
    t_rows.push_back({t.name, type, shape_text(t), std::to_string(t.nbytes), std::to_string(t.file_offset)});
    nlohmann::json tj;
    tj["name"] = t.name;
    tj["type"] = t.type_name;
    tj["type_id"] = t.file_type;
    tj["supported"] = t.supported;
    tj["shape"] = std::vector<int64_t>(t.ne, t.ne + t.n_dims);
    tj["bytes"] = t.nbytes;
    tj["offset"] = t.file_offset;
    tensors.push_back(tj);
    per_type[t.type_name].first += 1;
    per_type[t.type_name].second += t.nbytes;
    total += t.nbytes;
  }
  j["tensors"] = tensors;
  nlohmann::json totals = nlohmann::json::object();
  std::vector<std::vector<std::string>> total_rows = {{"type", "tensors", "bytes"}};
  for (const auto &[type, tb] : per_type) {
    totals[type] = {{"tensors", tb.first}, {"bytes", tb.second}};
    total_rows.push_back({type, std::to_string(tb.first), std::to_string(tb.second)});
  }
  total_rows.push_back({"all", std::to_string(bp_gguf_tensor_count(f)), std::to_string(total)});
  j["totals"] = totals;
  j["total_bytes"] = total;

  if (json) {
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("file        %s (%" PRIu64 " bytes)\nversion     %u\nalignment   %" PRIu64
                "\ndata        from byte %" PRIu64 "\n",
                path.c_str(), bp_gguf_file_size(f), bp_gguf_version(f), bp_gguf_alignment(f), bp_gguf_data_offset(f));
    std::printf("metadata    %zu pairs\n%s", bp_gguf_kv_count(f), tools::text_table(kv_rows, "  ").c_str());
    std::printf("tensors     %zu\n%s", bp_gguf_tensor_count(f), tools::text_table(t_rows, "  ").c_str());
    std::printf("per type\n%s", tools::text_table(total_rows, "  ").c_str());
  }
  bp_gguf_close(f);
  return 0;
}

}  // namespace bp::gguf_tool
