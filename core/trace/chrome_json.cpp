// chrome_json.cpp: a recording as Chrome trace-event JSON
// ({"traceEvents": [...]}, the format Perfetto and chrome://tracing open).
//
// Times are microseconds written from integer nanoseconds with exactly three
// decimals, so a span that ends where its parent ends still nests in the
// file (floating-point rounding could push it a hair outside). Each backend
// is a "process" and each lane a "thread", named by "M" events.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "backplane/backplane.h"
#include "core/trace/recorder.hpp"

namespace bp::core::trace {
namespace {

void append_escaped(std::string &out, const char *s) {
  out += '"';
  for (; *s; ++s) {
    const auto c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void append_micros(std::string &out, uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
  out += buf;
}

void append_shape(std::string &out, const int64_t *ne) {
  out += '[';
  for (int d = 0; d < BP_MAX_DIMS; ++d) {
    if (d) out += ',';
    out += std::to_string(ne[d]);
  }
  out += ']';
}

void append_node_args(std::string &out, const node_info &n, const std::string &backend) {
  out += "\"node\":";
  append_escaped(out, n.name);
  out += ",\"backend\":";
  append_escaped(out, backend.c_str());
  out += ",\"type\":";
  append_escaped(out, bp_type_name(n.type));
  out += ",\"shape\":";
  append_shape(out, n.ne);
  out += ",\"src\":[";
  for (int i = 0; i < n.n_src; ++i) {
    if (i) out += ',';
    out += "{\"type\":";
    append_escaped(out, bp_type_name(n.src_type[i]));
    out += ",\"shape\":";
    append_shape(out, n.src_ne[i]);
    out += '}';
  }
  out += "],\"bytes\":" + std::to_string(n.bytes) + ",\"flops\":" + std::to_string(n.flops);
}

std::string lane_name(uint32_t lane) {
  if (lane == kLaneHost) return "host calls";
  if (lane == kLaneNodes) return "nodes";
  return "worker " + std::to_string(lane - kLaneWorker0);
}

void append_metadata(std::string &out, const char *what, uint32_t pid, const uint32_t *tid, const std::string &name) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += what;
  out += "\",\"pid\":" + std::to_string(pid);
  if (tid) out += ",\"tid\":" + std::to_string(*tid);
  out += ",\"args\":{\"name\":";
  append_escaped(out, name.c_str());
  out += "}},\n";
}

}  // namespace

bool write_chrome_json(const snapshot &s, const std::string &path, std::string &why) {
  std::vector<const event *> order;
  order.reserve(s.events.size());
  for (const event &e : s.events) order.push_back(&e);
  // Per lane by start, a parent (longer) before the child that starts with it.
  std::stable_sort(order.begin(), order.end(), [](const event *a, const event *b) {
    if (a->track != b->track) return a->track < b->track;
    if (a->lane != b->lane) return a->lane < b->lane;
    if (a->begin != b->begin) return a->begin < b->begin;
    return a->end > b->end;
  });
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  std::set<std::pair<uint32_t, uint32_t>> lanes;
  for (const event *e : order) lanes.emplace(e->track, e->lane);
  uint32_t last_track = UINT32_MAX;
  for (const auto &[track, lane] : lanes) {
    // pid 0 is the process itself in some viewers: backends start at 1.
    const uint32_t pid = track + 1;
    const std::string backend = track < s.tracks.size() ? s.tracks[track] : "?";
    if (track != last_track) {
      append_metadata(out, "process_name", pid, nullptr, "backend " + backend);
      last_track = track;
    }
    append_metadata(out, "thread_name", pid, &lane, lane_name(lane));
  }
  for (const event *e : order) {
    const uint64_t begin = e->begin >= s.origin ? e->begin - s.origin : 0;
    const std::string backend = e->track < s.tracks.size() ? s.tracks[e->track] : "?";
    out += "{\"ph\":\"X\",\"name\":";
    append_escaped(out, e->name.c_str());
    out += ",\"cat\":";
    append_escaped(out, e->category);
    out += ",\"pid\":" + std::to_string(e->track + 1) + ",\"tid\":" + std::to_string(e->lane) + ",\"ts\":";
    append_micros(out, begin);
    out += ",\"dur\":";
    append_micros(out, e->end - e->begin);
    out += ",\"args\":{";
    if (e->has_node && e->node_full) {
      append_node_args(out, e->node, backend);
    } else if (e->has_node) {
      out += "\"node\":";
      append_escaped(out, e->node.name);
      out += ",\"part\":" + std::to_string(e->lane - kLaneWorker0);
    } else {
      out += e->args;
    }
    out += "}},\n";
  }
  // The closing event keeps every line above ending in a comma.
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"backplane\"}}\n]}\n";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    why = "cannot write the trace file '" + path + "': " + std::strerror(errno);
    return false;
  }
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    why = "cannot write the trace file '" + path + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace bp::core::trace
