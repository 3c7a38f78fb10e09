#include "profile/flamegraph.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
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
constexpr std::string_view kMergedType = "merged";

// One frame of a location: its function (index into data.functions) and line.
struct Frame {
  uint32_t function;
  int64_t line;
};

class DataBuilder {
 public:
  DataBuilder(const pb::Profile& profile, size_t max_nodes) : profile_(profile), max_nodes_(max_nodes) {}

  Result<FlamegraphData> build() {
    if (profile_.sample_type_size() == 0) return make_error("the profile has no sample type");
    value_index_ = choose_value_index();
    const auto& type = profile_.sample_type(value_index_);
    data_.sample_type = str(type.type()) + "/" + str(type.unit());
    for (const auto& m : profile_.mapping()) mappings_.emplace(m.id(), &m);
    for (const auto& f : profile_.function()) functions_.emplace(f.id(), &f);
    for (const auto& l : profile_.location()) locations_.emplace(l.id(), &l);
    data_.functions.push_back({"all", "", "", {}});

    parent_.push_back(0);
    function_.push_back(0);
    std::unordered_map<uint64_t, int64_t> merged_samples;  // node << 32 | label set
    int64_t tid_labels = 0, empty_values = 0, negative_values = 0, no_frames = 0;
    std::vector<Frame> stack;
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
      stack.clear();
      for (int i = sample.location_id_size() - 1; i >= 0; --i) {
        auto location = locations_.find(sample.location_id(i));
        if (location == locations_.end()) {
          return make_error(fmt::format("sample {} refers to location {}, which the profile does not hold", s,
                                        sample.location_id(i)));
        }
        auto frames = location_frames(*location->second);
        if (!frames) return make_error(fmt::format("sample {}: {}", s, frames.error().message));
        stack.insert(stack.end(), (*frames)->rbegin(), (*frames)->rend());
      }
      uint32_t node = 0;
      for (const Frame& frame : stack) {
        node = child(node, frame.function);
        line_samples_[{frame.function, frame.line}] += value;
      }
      if (node == 0) ++no_frames;
      // The labels as the profile's integers first: most samples repeat a
      // set seen before, and comparing integers is cheap.
      label_ids_.clear();
      for (const auto& label : sample.label()) {
        if (str(label.key()) == kDroppedLabel) {
          ++tid_labels;
          continue;
        }
        label_ids_.insert(label_ids_.end(), {label.key(), label.str(), label.num()});
      }
      auto [known, added] = label_set_by_ids_.try_emplace(label_ids_, 0);
      if (added) {
        LabelSetKey labels;
        for (size_t i = 0; i < label_ids_.size(); i += 3) {
          labels.emplace_back(str(label_ids_[i]),
                              label_ids_[i + 1] != 0 ? str(label_ids_[i + 1]) : std::to_string(label_ids_[i + 2]));
        }
        std::sort(labels.begin(), labels.end());
        known->second = label_set(std::move(labels));
      }
      merged_samples[(static_cast<uint64_t>(node) << 32) | known->second] += value;
      data_.total += value;
    }
    for (const auto& [key, value] : merged_samples) {
      samples_.push_back({static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key & 0xffffffffu), value});
    }
    data_.nodes_before_merge = parent_.size();
    int64_t threshold = merge_small_nodes();
    order_nodes();
    collect_lines();

    auto& merged = data_.merged;
    if (tid_labels) {
      merged.push_back(fmt::format("thread ids dropped: the tid label of {} pprof samples is not kept, so the "
                                   "threads of a process merge (thread_name stays)",
                                   tid_labels));
    }
    merged.push_back(fmt::format("{} pprof samples merged into {} distinct stacks and label sets", data_.pprof_samples,
                                 data_.samples.size()));
    merged.push_back("a function's frames at different lines are one frame (the tooltip lists its lines)");
    if (threshold > 0) {
      merged.push_back(fmt::format("{} stack nodes are more than the page's {}: each subtree of {} samples or fewer "
                                   "is one \"[merged]\" frame under its caller, {} nodes left",
                                   data_.nodes_before_merge, max_nodes_, threshold, data_.node_parent.size()));
    }
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
  using Sample = FlamegraphData::Sample;

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
  // function owning the address); computed once per location, not copied.
  Result<const std::vector<Frame>*> location_frames(const pb::Location& location) {
    if (auto cached = location_frames_.find(location.id()); cached != location_frames_.end()) {
      return &cached->second;
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
    std::vector<Frame> frames;
    for (const auto& line : location.line()) {
      auto function = functions_.find(line.function_id());
      if (function == functions_.end()) {
        return make_error(fmt::format("location {} refers to function {}, which the profile does not hold",
                                      location.id(), line.function_id()));
      }
      const std::string& name = str(function->second->name());
      frames.push_back({function_index(name, str(function->second->filename()),
                                       frame_type_of(name, str(function->second->system_name()), mapping_file)),
                        line.line()});
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
      frames.push_back({function_index(name, "", frame_type_of(name, "", mapping_file)), 0});
    }
    return &location_frames_.emplace(location.id(), std::move(frames)).first->second;
  }

  uint32_t function_index(const std::string& name, const std::string& file, const std::string& type) {
    auto [it, added] = function_ids_.try_emplace({name, file, type}, static_cast<uint32_t>(data_.functions.size()));
    if (added) data_.functions.push_back({name, file, type, {}});
    return it->second;
  }

  uint32_t child(uint32_t parent, uint32_t function) {
    uint64_t key = (static_cast<uint64_t>(parent) << 32) | function;
    auto [it, added] = children_.try_emplace(key, static_cast<uint32_t>(parent_.size()));
    if (added) {
      parent_.push_back(parent);
      function_.push_back(function);
    }
    return it->second;
  }

  uint32_t label_set(LabelSetKey labels) {
    auto [it, added] = label_set_ids_.try_emplace(std::move(labels), static_cast<uint32_t>(data_.label_sets.size()));
    if (added) data_.label_sets.push_back(it->first);
    return it->second;
  }

  // Past the node budget: keeps the nodes holding more than a threshold
  // (an ancestor holds at least what its descendants hold, so they form a
  // tree) and makes each dropped subtree part of one merged node under its
  // kept caller. Returns the threshold, 0 if nothing was merged.
  int64_t merge_small_nodes() {
    size_t n = parent_.size();
    if (n <= max_nodes_) return 0;
    std::vector<int64_t> total(n, 0);
    for (const Sample& s : samples_) total[s.node] += s.value;
    for (size_t i = n - 1; i > 0; --i) total[parent_[i]] += total[i];
    // Room for a merged node beside each kept one.
    size_t keep = std::max<size_t>(1, max_nodes_ / 2);
    std::vector<int64_t> sorted(total);
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(keep - 1), sorted.end(),
                     std::greater<>());
    int64_t threshold = sorted[keep - 1];
    // Strictly more than the keep-th largest: at most keep - 1 nodes.
    uint32_t merged_function = static_cast<uint32_t>(data_.functions.size());
    data_.functions.push_back({fmt::format("[merged: subtrees of {} samples or fewer]", threshold), "",
                               std::string(kMergedType), {}});
    std::vector<uint32_t> new_parent{0}, new_function{0};
    std::vector<uint32_t> mapped(n, 0);
    std::unordered_map<uint32_t, uint32_t> merged_child;  // kept node (new index) -> its merged node
    for (size_t i = 1; i < n; ++i) {
      uint32_t parent = mapped[parent_[i]];
      bool parent_kept = new_function[parent] != merged_function;
      if (total[i] > threshold && parent_kept) {
        mapped[i] = static_cast<uint32_t>(new_parent.size());
        new_parent.push_back(parent);
        new_function.push_back(function_[i]);
      } else if (parent_kept) {
        auto [it, added] = merged_child.try_emplace(parent, static_cast<uint32_t>(new_parent.size()));
        if (added) {
          new_parent.push_back(parent);
          new_function.push_back(merged_function);
        }
        mapped[i] = it->second;
      } else {
        mapped[i] = parent;  // inside a merged subtree
      }
    }
    std::unordered_map<uint64_t, int64_t> remerged;
    for (const Sample& s : samples_) remerged[(static_cast<uint64_t>(mapped[s.node]) << 32) | s.label_set] += s.value;
    samples_.clear();
    for (const auto& [key, value] : remerged) {
      samples_.push_back({static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key & 0xffffffffu), value});
    }
    parent_ = std::move(new_parent);
    function_ = std::move(new_function);
    return threshold;
  }

  // Numbers the nodes in preorder with siblings by function name (then
  // file, type; the merged node last), so that a subtree is a range and
  // siblings are drawn in name order.
  void order_nodes() {
    size_t n = parent_.size();
    std::vector<uint32_t> rank(data_.functions.size());
    {
      std::vector<uint32_t> by_name(data_.functions.size());
      for (uint32_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
      const auto& fs = data_.functions;
      std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) {
        bool am = fs[a].type == kMergedType, bm = fs[b].type == kMergedType;
        return std::tie(am, fs[a].name, fs[a].file, fs[a].type) < std::tie(bm, fs[b].name, fs[b].file, fs[b].type);
      });
      for (uint32_t i = 0; i < by_name.size(); ++i) rank[by_name[i]] = i;
    }
    // Children lists (CSR), each sorted by rank.
    std::vector<uint32_t> first(n + 1, 0), children(n > 0 ? n - 1 : 0);
    for (size_t i = 1; i < n; ++i) ++first[parent_[i] + 1];
    for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (size_t i = 1; i < n; ++i) children[fill[parent_[i]]++] = static_cast<uint32_t>(i);
    for (size_t i = 0; i < n; ++i) {
      std::sort(children.begin() + first[i], children.begin() + first[i + 1],
                [&](uint32_t a, uint32_t b) { return rank[function_[a]] < rank[function_[b]]; });
    }
    std::vector<uint32_t> index(n, 0);
    data_.node_parent.assign(n, 0);
    data_.node_end.assign(n, 0);
    data_.node_function.assign(n, 0);
    // Iterative DFS: deep stacks (512 frames, recursion) must not exhaust
    // the C++ stack.
    std::vector<std::pair<uint32_t, bool>> pending{{0, false}};
    uint32_t next = 0;
    while (!pending.empty()) {
      auto [node, done] = pending.back();
      pending.pop_back();
      if (done) {
        data_.node_end[index[node]] = next;
        continue;
      }
      index[node] = next++;
      data_.node_parent[index[node]] = node == 0 ? 0 : index[parent_[node]];
      data_.node_function[index[node]] = function_[node];
      pending.push_back({node, true});
      for (uint32_t c = first[node + 1]; c > first[node]; --c) pending.push_back({children[c - 1], false});
    }
    for (Sample& s : samples_) s.node = index[s.node];
    std::sort(samples_.begin(), samples_.end(), [](const Sample& a, const Sample& b) {
      return std::tie(a.node, a.label_set) < std::tie(b.node, b.label_set);
    });
    data_.samples = std::move(samples_);
  }

  void collect_lines() {
    for (const auto& [key, samples] : line_samples_) data_.functions[key.first].lines.emplace_back(key.second, samples);
    for (auto& f : data_.functions) {
      std::sort(f.lines.begin(), f.lines.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
      });
    }
  }

  struct PairHash {
    size_t operator()(const std::pair<uint32_t, int64_t>& p) const {
      return std::hash<uint64_t>()((static_cast<uint64_t>(p.first) << 40) ^ static_cast<uint64_t>(p.second));
    }
  };

  const pb::Profile& profile_;
  size_t max_nodes_;
  int value_index_ = 0;
  FlamegraphData data_;
  std::unordered_map<uint64_t, const pb::Mapping*> mappings_;
  std::unordered_map<uint64_t, const pb::Function*> functions_;
  std::unordered_map<uint64_t, const pb::Location*> locations_;
  std::unordered_map<uint64_t, std::vector<Frame>> location_frames_;
  std::map<std::tuple<std::string, std::string, std::string>, uint32_t> function_ids_;
  std::unordered_map<uint64_t, uint32_t> children_;
  std::map<LabelSetKey, uint32_t> label_set_ids_;
  std::map<std::vector<int64_t>, uint32_t> label_set_by_ids_;  // (key, str, num)... -> label set
  std::vector<int64_t> label_ids_;
  std::unordered_map<std::pair<uint32_t, int64_t>, int64_t, PairHash> line_samples_;
  // The tree as built (parent index < child index), before order_nodes.
  std::vector<uint32_t> parent_, function_;
  std::vector<Sample> samples_;
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

Result<FlamegraphData> flamegraph_data(const pb::Profile& profile, size_t max_nodes) {
  return DataBuilder(profile, max_nodes).build();
}

std::string flamegraph_json(const FlamegraphData& data) {
  // Strings once, referred to by index: files and label values repeat.
  std::vector<std::string_view> strings;
  std::unordered_map<std::string_view, uint32_t> string_ids;
  auto intern = [&](std::string_view s) {
    auto [it, added] = string_ids.try_emplace(s, static_cast<uint32_t>(strings.size()));
    if (added) strings.push_back(s);
    return it->second;
  };
  std::vector<uint32_t> function_name, function_file, function_type;
  std::vector<std::vector<int64_t>> function_lines;  // line, samples, line, samples...
  for (const auto& f : data.functions) {
    function_name.push_back(intern(f.name));
    function_file.push_back(intern(f.file));
    function_type.push_back(intern(f.type));
    auto& lines = function_lines.emplace_back();
    for (const auto& [line, samples] : f.lines) {
      lines.push_back(line);
      lines.push_back(samples);
    }
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
  std::string& out = json.out();
  auto key = [&](std::string_view name) {
    json.string(name);
    out.push_back(':');
  };
  auto list_of_lists = [&](const auto& lists) {
    out += '[';
    for (size_t i = 0; i < lists.size(); ++i) {
      if (i) out += ',';
      json.numbers(lists[i]);
    }
    out += ']';
  };
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
  key("functions");
  out += '{';
  key("name");
  json.numbers(function_name);
  out += ',';
  key("file");
  json.numbers(function_file);
  out += ',';
  key("type");
  json.numbers(function_type);
  out += ',';
  key("lines");
  list_of_lists(function_lines);
  out += "},";
  key("nodes");
  out += '{';
  key("parent");
  json.numbers(data.node_parent);
  out += ',';
  key("end");
  json.numbers(data.node_end);
  out += ',';
  key("func");
  json.numbers(data.node_function);
  out += "},";
  key("labelSets");
  list_of_lists(label_sets);
  out += ',';
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
