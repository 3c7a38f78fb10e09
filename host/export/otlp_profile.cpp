#include "export/otlp_profile.h"

#include <map>
#include <random>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profile/frame_type.h"

namespace omniprof {
namespace {

namespace pb = perftools::profiles;
namespace otlp_common = opentelemetry::proto::common::v1;

// OpenTelemetry's name for a frame type where it differs from the plugin's
// (profile.frame.type: "cpython", as the OpenTelemetry profiler sends it).
std::string otlp_frame_type(const std::string& type) { return type == "python" ? "cpython" : type; }

// The shared tables of a request, each starting with its zero value, and the
// indexes of what they hold so nothing is stored twice.
class Dictionary {
 public:
  explicit Dictionary(otlp_profiles::ProfilesDictionary& tables) : tables_(tables) {
    string("");
    tables_.add_mapping_table();
    tables_.add_location_table();
    tables_.add_function_table();
    tables_.add_link_table();
    tables_.add_attribute_table();
    tables_.add_stack_table();
  }

  int32_t string(const std::string& text) {
    auto [it, inserted] = strings_.try_emplace(text, tables_.string_table_size());
    if (inserted) tables_.add_string_table(text);
    return it->second;
  }

  int32_t attribute(const std::string& key, const std::string& value) {
    return attribute(AttributeKey{string(key), false, value, 0}, [&](otlp_common::AnyValue& any) {
      any.set_string_value(value);
    });
  }
  int32_t attribute(const std::string& key, int64_t value) {
    return attribute(AttributeKey{string(key), true, "", value}, [&](otlp_common::AnyValue& any) {
      any.set_int_value(value);
    });
  }

  int32_t stack(const std::vector<int32_t>& locations) {
    auto [it, inserted] = stacks_.try_emplace(locations, tables_.stack_table_size());
    if (inserted) {
      auto* stack = tables_.add_stack_table();
      for (int32_t index : locations) stack->add_location_indices(index);
    }
    return it->second;
  }

  otlp_profiles::ProfilesDictionary& tables() { return tables_; }

 private:
  using AttributeKey = std::tuple<int32_t, bool, std::string, int64_t>;
  template <typename SetValue>
  int32_t attribute(const AttributeKey& key, SetValue set_value) {
    auto [it, inserted] = attributes_.try_emplace(key, tables_.attribute_table_size());
    if (inserted) {
      auto* entry = tables_.add_attribute_table();
      entry->set_key_strindex(std::get<0>(key));
      set_value(*entry->mutable_value());
    }
    return it->second;
  }

  otlp_profiles::ProfilesDictionary& tables_;
  std::unordered_map<std::string, int32_t> strings_;
  std::map<AttributeKey, int32_t> attributes_;
  std::map<std::vector<int32_t>, int32_t> stacks_;
};

const LabelAttribute* label_attribute(const std::string& label) {
  for (const LabelAttribute& entry : kLabelAttributes) {
    if (entry.pprof_label == label) return &entry;
  }
  return nullptr;
}

// Who a sample's process is: the resource of its ResourceProfiles.
struct ResourceKey {
  std::vector<std::pair<std::string, std::string>> strings;  // attribute, value; in label order
  std::vector<std::pair<std::string, int64_t>> numbers;
  friend auto operator<=>(const ResourceKey&, const ResourceKey&) = default;
};

std::string random_profile_id() {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  std::string id(16, '\0');
  for (size_t i = 0; i < id.size(); i += 8) {
    uint64_t word = generator();
    for (size_t b = 0; b < 8; ++b) id[i + b] = static_cast<char>(word >> (8 * b));
  }
  return id;
}

}  // namespace

otlp_collector::ExportProfilesServiceRequest otlp_request(const pb::Profile& profile,
                                                          const std::set<std::string>& resource_keys,
                                                          const OtlpScope& scope,
                                                          const std::vector<std::vector<uint64_t>>& sample_times) {
  otlp_collector::ExportProfilesServiceRequest request;
  Dictionary dictionary(*request.mutable_dictionary());
  auto& tables = dictionary.tables();
  auto pprof_string = [&profile](int64_t index) -> const std::string& {
    static const std::string kNone;
    return index >= 0 && index < profile.string_table_size() ? profile.string_table(static_cast<int>(index)) : kNone;
  };

  std::unordered_map<uint64_t, int32_t> mapping_index;
  std::unordered_map<uint64_t, const pb::Mapping*> mapping_by_id;
  for (const pb::Mapping& mapping : profile.mapping()) {
    mapping_index[mapping.id()] = tables.mapping_table_size();
    mapping_by_id[mapping.id()] = &mapping;
    auto* out = tables.add_mapping_table();
    out->set_memory_start(mapping.memory_start());
    out->set_memory_limit(mapping.memory_limit());
    out->set_file_offset(mapping.file_offset());
    out->set_filename_strindex(dictionary.string(pprof_string(mapping.filename())));
    if (const std::string& build_id = pprof_string(mapping.build_id()); !build_id.empty()) {
      out->add_attribute_indices(dictionary.attribute(std::string(kBuildIdAttribute), build_id));
    }
  }

  std::unordered_map<uint64_t, int32_t> function_index;
  std::unordered_map<uint64_t, const pb::Function*> function_by_id;
  for (const pb::Function& function : profile.function()) {
    function_index[function.id()] = tables.function_table_size();
    function_by_id[function.id()] = &function;
    const std::string& name = pprof_string(function.name());
    const std::string& system_name = pprof_string(function.system_name());
    // A plugin's frame says its type in pprof's system_name ("python:f",
    // profile/frame_type.h), for pprof's readers; OTLP says it in the
    // location's attribute, so the system name is the name itself.
    const bool typed = frame_type_of(name, system_name, "") != "native";
    auto* out = tables.add_function_table();
    out->set_name_strindex(dictionary.string(name));
    out->set_system_name_strindex(dictionary.string(typed ? name : system_name));
    out->set_filename_strindex(dictionary.string(pprof_string(function.filename())));
    out->set_start_line(function.start_line());
  }

  std::unordered_map<uint64_t, int32_t> location_index;
  for (const pb::Location& location : profile.location()) {
    location_index[location.id()] = tables.location_table_size();
    auto* out = tables.add_location_table();
    auto mapping = mapping_index.find(location.mapping_id());
    if (mapping != mapping_index.end()) out->set_mapping_index(mapping->second);
    out->set_address(location.address());
    for (const pb::Line& line : location.line()) {
      auto* out_line = out->add_lines();
      if (auto it = function_index.find(line.function_id()); it != function_index.end()) {
        out_line->set_function_index(it->second);
      }
      out_line->set_line(line.line());
    }
    // The frame's type is that of the function owning the address (the last
    // line; the ones before it are inlined into it).
    std::string name, system_name, mapping_file;
    if (location.line_size() > 0) {
      if (auto it = function_by_id.find(location.line(location.line_size() - 1).function_id()); it != function_by_id.end()) {
        name = pprof_string(it->second->name());
        system_name = pprof_string(it->second->system_name());
      }
    }
    if (auto it = mapping_by_id.find(location.mapping_id()); it != mapping_by_id.end()) {
      mapping_file = pprof_string(it->second->filename());
    }
    out->add_attribute_indices(dictionary.attribute(std::string(kFrameTypeAttribute),
                                                    otlp_frame_type(frame_type_of(name, system_name, mapping_file))));
  }

  int count_index = 0;
  for (int i = 0; i < profile.sample_type_size(); ++i) {
    if (pprof_string(profile.sample_type(i).type()) == "samples") count_index = i;
  }

  // One ResourceProfiles (and Profile) per process, in the order their first
  // samples come.
  std::map<ResourceKey, otlp_profiles::Profile*> profiles;
  for (int sample_index = 0; sample_index < profile.sample_size(); ++sample_index) {
    const pb::Sample& sample = profile.sample(sample_index);
    ResourceKey resource;
    std::vector<int32_t> attributes;
    for (const pb::Label& label : sample.label()) {
      const std::string& key = pprof_string(label.key());
      const LabelAttribute* known = label_attribute(key);
      const std::string attribute = known ? std::string(known->attribute) : key;
      const bool is_resource = known ? known->resource : resource_keys.count(key) > 0;
      const bool numeric = known ? known->numeric : label.str() == 0;
      if (!numeric) {
        const std::string& value = pprof_string(label.str());
        if (is_resource) {
          resource.strings.emplace_back(attribute, value);
        } else {
          attributes.push_back(dictionary.attribute(attribute, value));
        }
      } else if (is_resource) {
        resource.numbers.emplace_back(attribute, label.num());
      } else {
        attributes.push_back(dictionary.attribute(attribute, label.num()));
      }
    }
    auto [it, inserted] = profiles.try_emplace(resource, nullptr);
    if (inserted) {
      auto* resource_profiles = request.add_resource_profiles();
      auto* resource_attributes = resource_profiles->mutable_resource()->mutable_attributes();
      for (const auto& [key, value] : resource.numbers) {
        auto* kv = resource_attributes->Add();
        kv->set_key(key);
        kv->mutable_value()->set_int_value(value);
      }
      for (const auto& [key, value] : resource.strings) {
        auto* kv = resource_attributes->Add();
        kv->set_key(key);
        kv->mutable_value()->set_string_value(value);
      }
      auto* scope_profiles = resource_profiles->add_scope_profiles();
      scope_profiles->mutable_scope()->set_name(scope.name);
      scope_profiles->mutable_scope()->set_version(scope.version);
      auto* out = scope_profiles->add_profiles();
      out->mutable_sample_type()->set_type_strindex(dictionary.string("samples"));
      out->mutable_sample_type()->set_unit_strindex(dictionary.string("count"));
      out->mutable_period_type()->set_type_strindex(dictionary.string("cpu"));
      out->mutable_period_type()->set_unit_strindex(dictionary.string("nanoseconds"));
      out->set_period(profile.period());
      out->set_time_unix_nano(static_cast<uint64_t>(profile.time_nanos()));
      out->set_duration_nano(static_cast<uint64_t>(profile.duration_nanos()));
      out->set_profile_id(random_profile_id());
      it->second = out;
    }
    std::vector<int32_t> stack;
    stack.reserve(static_cast<size_t>(sample.location_id_size()));
    for (uint64_t id : sample.location_id()) {
      auto location = location_index.find(id);
      stack.push_back(location != location_index.end() ? location->second : 0);
    }
    auto* out = it->second->add_samples();
    out->set_stack_index(dictionary.stack(stack));
    for (int32_t index : attributes) out->add_attribute_indices(index);
    const int64_t count = count_index < sample.value_size() ? sample.value(count_index) : 0;
    const std::vector<uint64_t>* times =
        static_cast<size_t>(sample_index) < sample_times.size() ? &sample_times[static_cast<size_t>(sample_index)] : nullptr;
    if (times && count > 0 && times->size() == static_cast<size_t>(count)) {
      for (uint64_t t : *times) {
        out->add_values(1);
        out->add_timestamps_unix_nano(t);
      }
    } else {
      out->add_values(count);
    }
  }
  return request;
}

}  // namespace omniprof
