#include "profile/flamegraph.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>
#include <string_view>
#include <unordered_map>

#include "profile/frame_type.h"
#include "profile/profile_builder.h"

// The page's template and script (host/profile/flamegraph_page.html, .js),
// written into a generated source file at build time (cmake/EmbedFile.cmake).
namespace omniprof::embedded {
extern const char kFlamegraphPageHtml[];
extern const size_t kFlamegraphPageHtmlSize;
extern const char kFlamegraphPageJs[];
extern const size_t kFlamegraphPageJsSize;
}  // namespace omniprof::embedded

namespace omniprof {
namespace {

namespace pb = perftools::profiles;

// The label dropped to merge threads (see flamegraph.h).
constexpr std::string_view kDroppedLabel = "tid";

struct FrameKey {
  std::string name, file;
  int64_t line;
  std::string type;
  friend auto operator<=>(const FrameKey&, const FrameKey&) = default;
};

class DataBuilder {
 public:
  explicit DataBuilder(const pb::Profile& profile) : profile_(profile) {}

  Result<FlamegraphData> build() {
    if (profile_.sample_type_size() == 0) return make_error("the profile has no sample type");
    value_index_ = choose_value_index();
    const auto& type = profile_.sample_type(value_index_);
    data_.sample_type = str(type.type()) + "/" + str(type.unit());
    for (const auto& m : profile_.mapping()) mappings_.emplace(m.id(), &m);
    for (const auto& f : profile_.function()) functions_.emplace(f.id(), &f);
    for (const auto& l : profile_.location()) locations_.emplace(l.id(), &l);

    data_.node_parent.push_back(0);
    data_.node_frame.push_back(0);
    std::map<std::pair<uint32_t, uint32_t>, int64_t> merged_samples;
    int64_t tid_labels = 0, empty_values = 0, negative_values = 0, no_frames = 0;
    for (int s = 0; s < profile_.sample_size(); ++s) {
      const pb::Sample& sample = profile_.sample(s);
      ++data_.pprof_samples;
      if (sample.value_size() != profile_.sample_type_size()) {
        return make_error(fmt::format("sample {} has {} values for {} sample types", s, sample.value_size(),
                                      profile_.sample_type_size()));
      }
      int64_t value = sample.value(value_index_);
      if (value == 0) {
        ++empty_values;
        continue;
      }
      if (value < 0) {
        ++negative_values;
        continue;
      }
      // Root first: pprof lists the leaf first, and a location's lines
      // innermost first.
      uint32_t node = 0;
      for (int i = sample.location_id_size() - 1; i >= 0; --i) {
        auto location = locations_.find(sample.location_id(i));
        if (location == locations_.end()) {
          return make_error(fmt::format("sample {} refers to location {}, which the profile does not hold", s,
                                        sample.location_id(i)));
        }
        auto frames = location_frames(*location->second);
        if (!frames) return make_error(fmt::format("sample {}: {}", s, frames.error().message));
        for (auto frame = frames->rbegin(); frame != frames->rend(); ++frame) node = child(node, *frame);
      }
      if (node == 0) ++no_frames;
      LabelSetKey labels;
      for (const auto& label : sample.label()) {
        std::string key = str(label.key());
        if (key == kDroppedLabel) {
          ++tid_labels;
          continue;
        }
        labels.emplace_back(std::move(key), label.str() != 0 ? str(label.str()) : std::to_string(label.num()));
      }
      std::sort(labels.begin(), labels.end());
      merged_samples[{node, label_set(std::move(labels))}] += value;
      data_.total += value;
    }
    for (const auto& [key, value] : merged_samples) {
      data_.samples.push_back({key.first, key.second, value});
    }
    build_function_tree();

    auto& merged = data_.merged;
    if (tid_labels) {
      merged.push_back(fmt::format("thread ids dropped: the tid label of {} pprof samples is not kept, so the "
                                   "threads of a process merge (thread_name stays)",
                                   tid_labels));
    }
    merged.push_back(fmt::format("{} pprof samples merged into {} distinct stacks and label sets", data_.pprof_samples,
                                 data_.samples.size()));
    if (empty_values) merged.push_back(fmt::format("{} pprof samples with value 0 left out", empty_values));
    if (negative_values) {
      merged.push_back(fmt::format("{} pprof samples with a negative value left out", negative_values));
    }
    if (no_frames) merged.push_back("samples without any frame are the root's own");
    if (profile_.sample_type_size() > 1) {
      merged.push_back(fmt::format("weighed by {} (the profile has {} sample types)", data_.sample_type,
                                   profile_.sample_type_size()));
    }
    return std::move(data_);
  }

 private:
  using LabelSetKey = FlamegraphData::LabelSet;

  const std::string& str(int64_t index) const {
    static const std::string empty;
    return index >= 0 && index < profile_.string_table_size() ? profile_.string_table(static_cast<int>(index))
                                                               : empty;
  }

  // samples/count when the profile has it (omniprof's, perf's), else the
  // last sample type (pprof's default).
  int choose_value_index() const {
    for (int i = 0; i < profile_.sample_type_size(); ++i) {
      if (str(profile_.sample_type(i).type()) == "samples") return i;
    }
    return profile_.sample_type_size() - 1;
  }

  // The frames of a location, innermost first (its inlined calls, then the
  // function owning the address).
  Result<std::vector<uint32_t>> location_frames(const pb::Location& location) {
    if (auto cached = location_frames_.find(location.id()); cached != location_frames_.end()) {
      return cached->second;
    }
    std::string mapping_file;
    const pb::Mapping* mapping = nullptr;
    if (location.mapping_id() != 0) {
      auto found = mappings_.find(location.mapping_id());
      if (found == mappings_.end()) {
        return make_error(fmt::format("location {} refers to mapping {}, which the profile does not hold",
                                      location.id(), location.mapping_id()));
      }
      mapping = found->second;
      mapping_file = str(mapping->filename());
    }
    std::vector<uint32_t> frames;
    for (const auto& line : location.line()) {
      auto function = functions_.find(line.function_id());
      if (function == functions_.end()) {
        return make_error(fmt::format("location {} refers to function {}, which the profile does not hold",
                                      location.id(), line.function_id()));
      }
      const std::string& name = str(function->second->name());
      frames.push_back(frame({name, str(function->second->filename()), line.line(),
                              frame_type_of(name, str(function->second->system_name()), mapping_file)}));
    }
    if (frames.empty()) {
      std::string name;
      if (mapping) {
        std::string_view base = mapping_file;
        if (auto slash = base.rfind('/'); slash != std::string_view::npos) base.remove_prefix(slash + 1);
        uint64_t offset = location.address() - mapping->memory_start() + mapping->file_offset();
        name = fmt::format("{}+{:#x}", base.empty() ? "[unknown]" : base, offset);
      } else {
        name = fmt::format("{:#x}", location.address());
      }
      frames.push_back(frame({name, "", 0, frame_type_of(name, "", mapping_file)}));
    }
    location_frames_.emplace(location.id(), frames);
    return frames;
  }

  uint32_t frame(FrameKey key) {
    auto [it, added] = frame_ids_.try_emplace(std::move(key), static_cast<uint32_t>(data_.frames.size()));
    if (added) data_.frames.push_back({it->first.name, it->first.file, it->first.line, it->first.type});
    return it->second;
  }

  uint32_t child(uint32_t parent, uint32_t frame_id) {
    uint64_t key = (static_cast<uint64_t>(parent) << 32) | frame_id;
    auto [it, added] = children_.try_emplace(key, static_cast<uint32_t>(data_.node_parent.size()));
    if (added) {
      data_.node_parent.push_back(parent);
      data_.node_frame.push_back(frame_id);
    }
    return it->second;
  }

  uint32_t label_set(LabelSetKey labels) {
    auto [it, added] = label_set_ids_.try_emplace(std::move(labels), static_cast<uint32_t>(data_.label_sets.size()));
    if (added) data_.label_sets.push_back(it->first);
    return it->second;
  }

  // Function nodes: the prefix tree with a node's frames of one function
  // (name, file, type; any line) merged, then numbered in preorder with
  // siblings by name, so that a subtree is a range and siblings are drawn
  // in name order.
  void build_function_tree() {
    struct Unordered {
      uint32_t parent;
      uint32_t frame;
      std::vector<uint32_t> children;
    };
    std::vector<Unordered> nodes{{0, 0, {}}};
    std::map<std::tuple<uint32_t, std::string_view, std::string_view, std::string_view>, uint32_t> ids;
    std::vector<uint32_t> function_of(data_.node_parent.size(), 0);
    for (size_t i = 1; i < data_.node_parent.size(); ++i) {
      uint32_t parent = function_of[data_.node_parent[i]];
      const FlamegraphFrame& f = data_.frames[data_.node_frame[i]];
      auto [it, added] = ids.try_emplace({parent, f.name, f.file, f.type}, static_cast<uint32_t>(nodes.size()));
      if (added) {
        nodes.push_back({parent, data_.node_frame[i], {}});
        nodes[parent].children.push_back(it->second);
      }
      function_of[i] = it->second;
    }
    auto by_name = [&](uint32_t a, uint32_t b) {
      const FlamegraphFrame& fa = data_.frames[nodes[a].frame];
      const FlamegraphFrame& fb = data_.frames[nodes[b].frame];
      return std::tie(fa.name, fa.file, fa.type) < std::tie(fb.name, fb.file, fb.type);
    };
    std::vector<uint32_t> preorder_index(nodes.size(), 0);
    data_.function_parent.assign(nodes.size(), 0);
    data_.function_end.assign(nodes.size(), 0);
    data_.function_frame.assign(nodes.size(), 0);
    // Iterative DFS: a deep recursion (512-frame stacks, recursive code)
    // must not exhaust the C++ stack.
    std::vector<std::pair<uint32_t, bool>> stack{{0, false}};
    uint32_t next = 0;
    while (!stack.empty()) {
      auto [node, done] = stack.back();
      stack.pop_back();
      if (done) {
        data_.function_end[preorder_index[node]] = next;
        continue;
      }
      uint32_t index = next++;
      preorder_index[node] = index;
      data_.function_parent[index] = node == 0 ? 0 : preorder_index[nodes[node].parent];
      data_.function_frame[index] = nodes[node].frame;
      stack.push_back({node, true});
      auto& children = nodes[node].children;
      std::sort(children.begin(), children.end(), by_name);
      for (auto c = children.rbegin(); c != children.rend(); ++c) stack.push_back({*c, false});
    }
    data_.node_function.resize(function_of.size());
    for (size_t i = 0; i < function_of.size(); ++i) data_.node_function[i] = preorder_index[function_of[i]];
  }

  const pb::Profile& profile_;
  int value_index_ = 0;
  FlamegraphData data_;
  std::unordered_map<uint64_t, const pb::Mapping*> mappings_;
  std::unordered_map<uint64_t, const pb::Function*> functions_;
  std::unordered_map<uint64_t, const pb::Location*> locations_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> location_frames_;
  std::map<FrameKey, uint32_t> frame_ids_;
  std::unordered_map<uint64_t, uint32_t> children_;
  std::map<LabelSetKey, uint32_t> label_set_ids_;
};

// Writes JSON for the page. Strings are escaped for a <script> element of
// type application/json, whose content the HTML parser ends at the first
// "</script" (any case) and treats "<!--" specially: no '<' is ever
// written, so neither can occur. '>' and '&' are escaped too, for good
// measure, and U+2028/U+2029 (line terminators in older JavaScript).
class JsonWriter {
 public:
  std::string& out() { return out_; }
  int64_t invalid_utf8() const { return invalid_utf8_; }

  void string(std::string_view s) {
    out_.push_back('"');
    size_t i = 0;
    while (i < s.size()) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        switch (c) {
          case '"': out_ += "\\\""; break;
          case '\\': out_ += "\\\\"; break;
          case '\n': out_ += "\\n"; break;
          case '\r': out_ += "\\r"; break;
          case '\t': out_ += "\\t"; break;
          case '<': out_ += "\\u003c"; break;
          case '>': out_ += "\\u003e"; break;
          case '&': out_ += "\\u0026"; break;
          default:
            if (c < 0x20 || c == 0x7f) {
              out_ += fmt::format("\\u{:04x}", c);
            } else {
              out_.push_back(static_cast<char>(c));
            }
        }
        ++i;
        continue;
      }
      size_t length = utf8_sequence_length(s, i);
      if (length == 0) {
        out_ += "\\ufffd";
        ++invalid_utf8_;
        ++i;
        continue;
      }
      std::string_view sequence = s.substr(i, length);
      if (sequence == "\xe2\x80\xa8") {
        out_ += "\\u2028";
      } else if (sequence == "\xe2\x80\xa9") {
        out_ += "\\u2029";
      } else {
        out_.append(sequence);
      }
      i += length;
    }
    out_.push_back('"');
  }

  template <typename Numbers>
  void numbers(const Numbers& values) {
    out_.push_back('[');
    bool first = true;
    for (auto v : values) {
      if (!first) out_.push_back(',');
      first = false;
      fmt::format_to(std::back_inserter(out_), "{}", v);
    }
    out_.push_back(']');
  }

 private:
  // The length of the well-formed UTF-8 sequence at s[i] (a lead byte >=
  // 0x80), or 0 if it is not one (RFC 3629: no overlong forms, surrogates
  // or code points past U+10FFFF).
  static size_t utf8_sequence_length(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    unsigned char c = byte(0);
    size_t length;
    unsigned char min2 = 0x80, max2 = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      length = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      if (c == 0xe0) min2 = 0xa0;
      if (c == 0xed) max2 = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      if (c == 0xf0) min2 = 0x90;
      if (c == 0xf4) max2 = 0x8f;
    } else {
      return 0;
    }
    if (i + length > s.size()) return 0;
    if (byte(1) < min2 || byte(1) > max2) return 0;
    for (size_t k = 2; k < length; ++k) {
      if (byte(k) < 0x80 || byte(k) > 0xbf) return 0;
    }
    return length;
  }

  std::string out_;
  int64_t invalid_utf8_ = 0;
};

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// The template with each marker replaced by its text, in one pass, so a
// text holding a marker (a profile named after one) is never filled in.
// The template is ours: a missing marker is a build mistake (the unit tests
// write a page).
std::string fill_template(std::string_view page,
                          const std::vector<std::pair<std::string_view, std::string_view>>& markers) {
  std::string out;
  std::vector<bool> seen(markers.size(), false);
  size_t at = 0;
  for (;;) {
    size_t next = std::string_view::npos, which = 0;
    for (size_t m = 0; m < markers.size(); ++m) {
      size_t found = page.find(markers[m].first, at);
      if (found < next) next = found, which = m;
    }
    if (next == std::string_view::npos) break;
    out.append(page.substr(at, next - at)).append(markers[which].second);
    seen[which] = true;
    at = next + markers[which].first.size();
  }
  out.append(page.substr(at));
  for (size_t m = 0; m < markers.size(); ++m) {
    if (!seen[m]) throw std::logic_error(fmt::format("flamegraph template lacks {}", markers[m].first));
  }
  return out;
}

}  // namespace

Result<FlamegraphData> flamegraph_data(const pb::Profile& profile) { return DataBuilder(profile).build(); }

std::string flamegraph_json(const FlamegraphData& data) {
  // Strings once, referred to by index: the names and files of 100k stacks
  // repeat.
  std::vector<std::string_view> strings;
  std::unordered_map<std::string_view, uint32_t> string_ids;
  auto intern = [&](std::string_view s) {
    auto [it, added] = string_ids.try_emplace(s, static_cast<uint32_t>(strings.size()));
    if (added) strings.push_back(s);
    return it->second;
  };
  std::vector<uint32_t> frame_name, frame_file, frame_type;
  std::vector<int64_t> frame_line;
  for (const auto& f : data.frames) {
    frame_name.push_back(intern(f.name));
    frame_file.push_back(intern(f.file));
    frame_line.push_back(f.line);
    frame_type.push_back(intern(f.type));
  }
  std::vector<std::vector<uint32_t>> label_sets;
  for (const auto& set : data.label_sets) {
    auto& ids = label_sets.emplace_back();
    for (const auto& [key, value] : set) {
      ids.push_back(intern(key));
      ids.push_back(intern(value));
    }
  }
  std::vector<uint32_t> sample_node, sample_labels;
  std::vector<int64_t> sample_value;
  for (const auto& s : data.samples) {
    sample_node.push_back(s.node);
    sample_labels.push_back(s.label_set);
    sample_value.push_back(s.value);
  }

  JsonWriter json;
  auto key = [&](std::string_view name) {
    json.string(name);
    json.out().push_back(':');
  };
  std::string& out = json.out();
  out += '{';
  key("sampleType");
  json.string(data.sample_type);
  out += ',';
  key("total");
  out += std::to_string(data.total);
  out += ',';
  key("pprofSamples");
  out += std::to_string(data.pprof_samples);
  out += ",";
  key("frames");
  out += '{';
  key("name");
  json.numbers(frame_name);
  out += ',';
  key("file");
  json.numbers(frame_file);
  out += ',';
  key("line");
  json.numbers(frame_line);
  out += ',';
  key("type");
  json.numbers(frame_type);
  out += "},";
  key("nodes");
  out += '{';
  key("parent");
  json.numbers(data.node_parent);
  out += ',';
  key("frame");
  json.numbers(data.node_frame);
  out += ',';
  key("func");
  json.numbers(data.node_function);
  out += "},";
  key("functions");
  out += '{';
  key("parent");
  json.numbers(data.function_parent);
  out += ',';
  key("end");
  json.numbers(data.function_end);
  out += ',';
  key("frame");
  json.numbers(data.function_frame);
  out += "},";
  key("labelSets");
  out += '[';
  for (size_t i = 0; i < label_sets.size(); ++i) {
    if (i) out += ',';
    json.numbers(label_sets[i]);
  }
  out += "],";
  key("samples");
  out += '{';
  key("node");
  json.numbers(sample_node);
  out += ',';
  key("labels");
  json.numbers(sample_labels);
  out += ',';
  key("value");
  json.numbers(sample_value);
  out += "},";
  // Strings last: only now is the invalid UTF-8 count known.
  key("strings");
  out += '[';
  for (size_t i = 0; i < strings.size(); ++i) {
    if (i) out += ',';
    json.string(strings[i]);
  }
  out += "],";
  std::vector<std::string> merged = data.merged;
  if (json.invalid_utf8()) {
    merged.push_back(fmt::format("{} bytes of invalid UTF-8 in names shown as U+FFFD", json.invalid_utf8()));
  }
  key("merged");
  out += '[';
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i) out += ',';
    json.string(merged[i]);
  }
  out += "]}";
  return std::move(out);
}

std::string flamegraph_page(const FlamegraphData& data, const std::string& title) {
  std::string_view page(embedded::kFlamegraphPageHtml, embedded::kFlamegraphPageHtmlSize);
  std::string_view script(embedded::kFlamegraphPageJs, embedded::kFlamegraphPageJsSize);
  return fill_template(page, {{"OMNIPROF_FLAMEGRAPH_TITLE", html_escape(title)},
                              {"/*OMNIPROF_FLAMEGRAPH_SCRIPT*/", script},
                              {"OMNIPROF_FLAMEGRAPH_DATA", flamegraph_json(data)}});
}

Result<void> write_flamegraph_page(const pb::Profile& profile, const std::string& title, const std::string& path) {
  auto data = flamegraph_data(profile);
  if (!data) return make_error(fmt::format("flamegraph of {}: {}", title, data.error().message));
  return write_file_atomically(path, flamegraph_page(*data, title));
}

}  // namespace omniprof
