#include "profile/frame_type.h"

namespace omniprof {

std::string typed_system_name(std::string_view type, std::string_view name) {
  std::string out;
  out.reserve(type.size() + 1 + name.size());
  out.append(type).append(":").append(name);
  return out;
}

bool valid_frame_type(std::string_view type) {
  if (type.empty() || type.size() > 31) return false;
  for (char c : type) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

std::string frame_type_from_name(std::string_view name) {
  std::string type;
  for (char c : name.substr(0, 31)) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    type += ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) ? c : '_';
  }
  return type.empty() ? "other" : type;
}

std::string frame_type_of(std::string_view name, std::string_view system_name, std::string_view mapping_file) {
  if (system_name.size() > name.size() + 1 && system_name.substr(system_name.size() - name.size()) == name &&
      system_name[system_name.size() - name.size() - 1] == ':') {
    std::string_view type = system_name.substr(0, system_name.size() - name.size() - 1);
    if (valid_frame_type(type)) return std::string(type);
  }
  if (mapping_file == kKernelMappingName) return "kernel";
  return "native";
}

}  // namespace omniprof
