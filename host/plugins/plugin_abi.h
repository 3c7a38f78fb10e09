// Which plugins this host accepts by their versions, as
// sdk/include/omniprof/VERSIONING.md states it: the plugin ABI's major must
// be the host's, its minor at most the host's, its entry struct at least as
// large as that minor's; the BPF ABI must be the host's exactly.
#pragma once

#include <cstddef>
#include <string>

#include "omniprof/plugin.h"
#include "omniprof/support/result.h"

namespace omniprof {

// "host accepts plugin ABI 2.2 and older 2.x, BPF ABI 5": what `omniprof
// plugins` prints before its list.
std::string host_accepted_abi_text();

// "plugin ABI 99.0, BPF ABI 5": the versions an entry declares.
std::string plugin_abi_text(const omniprof_plugin& entry);

// sizeof(struct omniprof_plugin) as it was at `minor` of this host's major
// (every field up to that minor's last); 0 for a minor newer than the host's.
size_t plugin_struct_size_of_minor(uint16_t minor);

// Whether the host accepts an entry with these versions; the error says
// which version is at fault and what the host has.
Result<void> check_plugin_abi(const omniprof_plugin& entry);

}  // namespace omniprof
