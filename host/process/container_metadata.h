// What a container runtime says of a container beyond its cgroup path: its
// name, its labels (Docker's, a compose service's) or OCI annotations
// (containerd's and CRI-O's Kubernetes container, pod and namespace names),
// read from the runtime's own state on the host, once per container:
//   docker      /var/lib/docker/containers/ID/config.v2.json (Name, Config.Labels)
//   containerd  /run/containerd/io.containerd.runtime.v2.task/{k8s.io,moby,default}/ID/config.json (annotations)
//   cri-o       /run/containers/storage/overlay-containers/ID/userdata/config.json
//               (annotations, io.kubernetes.cri-o.Labels: the pod's labels)
//   podman      /var/lib/containers/storage/overlay-containers/ID/userdata/config.json
// A runtime whose state is elsewhere, or a file that is missing, says
// nothing: the process keeps what its cgroup path says.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "process/process_identity.h"

namespace omniprof {

// Docker's config.v2.json.
ContainerMetadata docker_container_metadata(std::string_view config_v2_json);
// An OCI bundle's config.json (containerd, CRI-O, podman).
ContainerMetadata oci_container_metadata(std::string_view config_json);

// The container's metadata, read under `state_root` ("/" on a host; tests
// point it elsewhere) from the files of the runtime its cgroup names, or of
// every runtime when the path does not say (a bare id under kubepods).
ContainerMetadata read_container_metadata(const std::string& state_root, const CgroupFacts& cgroup);

// Where read_process_facts looks: OMNIPROF_CONTAINER_STATE_ROOT if set (for
// tests), else "/".
const std::string& container_state_root();

}  // namespace omniprof
