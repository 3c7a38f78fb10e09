// A profile's samples as the interpreter tests judge them: labels, count and
// frames (function, file, line), read through `go tool pprof -traces -lines`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace omniprof::e2e {

struct Sample {
  std::map<std::string, std::string> labels;
  int64_t count = 0;
  std::vector<FrameLocation> frames;  // leaf first

  std::string label(const std::string& key) const {
    auto it = labels.find(key);
    return it == labels.end() ? std::string() : it->second;
  }
  bool has(const std::string& function) const { return index_of(function) != frames.size(); }
  size_t index_of(const std::string& function, size_t from = 0) const {
    for (size_t i = from; i < frames.size(); ++i) {
      if (frames[i].function == function) return i;
    }
    return frames.size();
  }
  std::string text() const {
    std::string out;
    for (const auto& [key, value] : labels) out += key + "=" + value + " ";
    out += ":";
    for (const auto& f : frames) out += " " + f.function + (f.line ? "@" + std::to_string(f.line) : "") + " <-";
    return out;
  }
};

inline std::vector<std::string> function_names(const std::vector<FrameLocation>& frames) {
  std::vector<std::string> names;
  for (const auto& f : frames) names.push_back(f.function);
  return names;
}

// The samples of the profile at `path`; empty with `*error` set when go
// cannot read it.
inline std::vector<Sample> read_samples(const std::string& path, std::string* error) {
  std::vector<Sample> samples;
  for (const PprofTrace& t : read_traces_with_go(path, error, {"-lines"})) {
    Sample s{t.labels, t.count, {}};
    for (const auto& frame : t.frames) s.frames.push_back(split_frame_location(frame));
    samples.push_back(std::move(s));
  }
  return samples;
}

// The samples whose pid label is `pid`.
inline std::vector<Sample> samples_of_pid(const std::vector<Sample>& samples, pid_t pid) {
  std::vector<Sample> out;
  for (const auto& s : samples) {
    if (s.label("pid") == std::to_string(pid)) out.push_back(s);
  }
  return out;
}

}  // namespace omniprof::e2e
