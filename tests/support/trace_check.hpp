// trace_check.hpp: reads a Chrome trace-event file that Backplane wrote
// (backplane/trace.h) and checks what every trace must hold: it parses,
// every span ("X") lies on a named track of a named process, and the spans
// of one track nest (a span that starts inside another ends inside it).
// Used by the core, scheduler and tool tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace bp::test {

struct trace_span {
  std::string name, category;
  int64_t pid = 0, tid = 0;
  int64_t begin_ns = 0, end_ns = 0;  // from the file's microseconds with three decimals
  nlohmann::json args;
};

struct trace_file {
  bool ok = false;
  std::vector<trace_span> spans;
  std::map<int64_t, std::string> processes;                    // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> threads;  // (pid, tid) -> name
};

// The file's microseconds, written with exactly three decimals, as integer ns.
inline int64_t trace_ns(const nlohmann::json &v) { return static_cast<int64_t>(v.get<double>() * 1000.0 + 0.5); }

// Parses |path|; a failure is a gtest failure and ok = false.
inline trace_file read_trace(const std::string &path) {
  trace_file t;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "no trace file at " << path;
    return t;
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    ADD_FAILURE() << path << " is not a trace-event JSON object: " << text.str().substr(0, 400);
    return t;
  }
  for (const auto &e : j["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "M") {
      const std::string what = e.value("name", "");
      const std::string name = e["args"].value("name", "");
      if (what == "process_name") t.processes[e.value("pid", -1)] = name;
      if (what == "thread_name") t.threads[{e.value("pid", -1), e.value("tid", -1)}] = name;
    } else if (ph == "X") {
      trace_span s;
      s.name = e.value("name", "");
      s.category = e.value("cat", "");
      s.pid = e.value("pid", -1);
      s.tid = e.value("tid", -1);
      s.begin_ns = trace_ns(e["ts"]);
      s.end_ns = s.begin_ns + trace_ns(e["dur"]);
      s.args = e.contains("args") ? e["args"] : nlohmann::json::object();
      t.spans.push_back(std::move(s));
    } else {
      ADD_FAILURE() << "unexpected event phase '" << ph << "' in " << path;
    }
  }
  t.ok = true;
  return t;
}

// Every span is on a named process and thread, and the spans of each track
// nest or follow one another.
inline void expect_well_formed(const trace_file &t) {
  std::map<std::pair<int64_t, int64_t>, std::vector<const trace_span *>> by_track;
  for (const trace_span &s : t.spans) {
    EXPECT_TRUE(t.processes.count(s.pid)) << "span '" << s.name << "' on unnamed process " << s.pid;
    EXPECT_TRUE(t.threads.count({s.pid, s.tid})) << "span '" << s.name << "' on unnamed track " << s.tid;
    EXPECT_LE(s.begin_ns, s.end_ns) << s.name;
    by_track[{s.pid, s.tid}].push_back(&s);
  }
  for (auto &[track, spans] : by_track) {
    std::stable_sort(spans.begin(), spans.end(), [](const trace_span *a, const trace_span *b) {
      return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->end_ns > b->end_ns;
    });
    std::vector<const trace_span *> open;
    for (const trace_span *s : spans) {
      while (!open.empty() && open.back()->end_ns <= s->begin_ns) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s->end_ns, open.back()->end_ns)
            << "span '" << s->name << "' starts inside '" << open.back()->name << "' but ends after it (track "
            << track.first << "/" << track.second << ")";
      }
      open.push_back(s);
    }
  }
}

// The spans of |category| whose track is named |thread| ("nodes", "host
// calls", "worker N"), or every track with a name starting "worker" when
// |thread| is "worker".
inline std::vector<const trace_span *> spans_on(const trace_file &t, const std::string &category,
                                                const std::string &thread) {
  std::vector<const trace_span *> out;
  for (const trace_span &s : t.spans) {
    if (s.category != category) continue;
    auto it = t.threads.find({s.pid, s.tid});
    if (it == t.threads.end()) continue;
    if (it->second == thread || (thread == "worker" && it->second.rfind("worker ", 0) == 0)) out.push_back(&s);
  }
  return out;
}

}  // namespace bp::test
