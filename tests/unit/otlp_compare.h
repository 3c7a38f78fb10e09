// One comparison of a pprof profile with the OTLP request made of it, for
// the unit and end-to-end tests: each side is read into the same form, every
// sample as one line holding its labels (pprof's names), its value and its
// frames (function, file, line, mapping file, build id, frame type), and the
// two must be equal line for line.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "export/otlp_profile.h"
#include "profile/frame_type.h"
#include "profile/profile.pb.h"

namespace otlp_compare {

// Line -> how many samples (merged: the same line twice adds up).
using Samples = std::map<std::string, int64_t>;

// OpenTelemetry's frame type name for omniprof's, written here apart from
// the exporter on purpose.
inline std::string expected_frame_type(const std::string& type) { return type == "python" ? "cpython" : type; }

inline Samples from_pprof(const perftools::profiles::Profile& p) {
  auto str = [&](int64_t i) { return p.string_table(static_cast<int>(i)); };
  std::map<uint64_t, const perftools::profiles::Mapping*> mappings;
  for (const auto& m : p.mapping()) mappings[m.id()] = &m;
  std::map<uint64_t, const perftools::profiles::Function*> functions;
  for (const auto& f : p.function()) functions[f.id()] = &f;
  std::map<uint64_t, const perftools::profiles::Location*> locations;
  for (const auto& l : p.location()) locations[l.id()] = &l;
  int count_index = 0;
  for (int i = 0; i < p.sample_type_size(); ++i) {
    if (str(p.sample_type(i).type()) == "samples") count_index = i;
  }
  Samples out;
  for (const auto& s : p.sample()) {
    std::vector<std::string> labels;
    for (const auto& l : s.label()) {
      labels.push_back(fmt::format("{}={}", str(l.key()), l.str() ? str(l.str()) : std::to_string(l.num())));
    }
    std::sort(labels.begin(), labels.end());
    std::string line = fmt::format("[{}]", fmt::join(labels, " "));
    for (uint64_t id : s.location_id()) {
      const auto* location = locations.at(id);
      const auto* mapping = location->mapping_id() ? mappings.at(location->mapping_id()) : nullptr;
      const std::string file = mapping ? str(mapping->filename()) : "";
      std::string type = "native";
      line += " |";
      for (const auto& ln : location->line()) {
        const auto* f = functions.at(ln.function_id());
        line += fmt::format(" {}@{}:{}", str(f->name()), str(f->filename()), ln.line());
        type = omniprof::frame_type_of(str(f->name()), str(f->system_name()), file);
      }
      line += fmt::format(" in {} {} ({})", file, mapping ? str(mapping->build_id()) : "", expected_frame_type(type));
    }
    out[line] += s.value(count_index);
  }
  return out;
}

inline Samples from_otlp(const omniprof::otlp_collector::ExportProfilesServiceRequest& request) {
  const auto& d = request.dictionary();
  auto str = [&](int32_t i) { return d.string_table(i); };
  auto pprof_key = [](const std::string& attribute) {
    for (const auto& entry : omniprof::kLabelAttributes) {
      if (entry.attribute == attribute) return std::string(entry.pprof_label);
    }
    return attribute;
  };
  auto any_text = [](const opentelemetry::proto::common::v1::AnyValue& v) {
    return v.has_int_value() ? std::to_string(v.int_value()) : v.string_value();
  };
  Samples out;
  for (const auto& rp : request.resource_profiles()) {
    std::vector<std::string> resource;
    for (const auto& kv : rp.resource().attributes()) {
      resource.push_back(fmt::format("{}={}", pprof_key(kv.key()), any_text(kv.value())));
    }
    for (const auto& sp : rp.scope_profiles()) {
      for (const auto& profile : sp.profiles()) {
        for (const auto& s : profile.samples()) {
          std::vector<std::string> labels = resource;
          for (int32_t a : s.attribute_indices()) {
            const auto& kv = d.attribute_table(a);
            labels.push_back(fmt::format("{}={}", pprof_key(str(kv.key_strindex())), any_text(kv.value())));
          }
          std::sort(labels.begin(), labels.end());
          std::string line = fmt::format("[{}]", fmt::join(labels, " "));
          for (int32_t li : d.stack_table(s.stack_index()).location_indices()) {
            const auto& location = d.location_table(li);
            const auto& mapping = d.mapping_table(location.mapping_index());
            std::string build_id, type;
            for (int32_t a : mapping.attribute_indices()) {
              if (str(d.attribute_table(a).key_strindex()) == omniprof::kBuildIdAttribute) {
                build_id = d.attribute_table(a).value().string_value();
              }
            }
            for (int32_t a : location.attribute_indices()) {
              if (str(d.attribute_table(a).key_strindex()) == omniprof::kFrameTypeAttribute) {
                type = d.attribute_table(a).value().string_value();
              }
            }
            line += " |";
            for (const auto& ln : location.lines()) {
              const auto& f = d.function_table(ln.function_index());
              line += fmt::format(" {}@{}:{}", str(f.name_strindex()), str(f.filename_strindex()), ln.line());
            }
            line += fmt::format(" in {} {} ({})", location.mapping_index() ? str(mapping.filename_strindex()) : "",
                                build_id, type);
          }
          // A timed sample is N values of 1 beside its N timestamps; an
          // untimed one its count. Either way, the sum is its count.
          int64_t count = 0;
          for (int64_t v : s.values()) count += v;
          out[line] += count;
        }
      }
    }
  }
  return out;
}

}  // namespace otlp_compare
