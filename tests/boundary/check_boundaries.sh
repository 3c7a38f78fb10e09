#!/usr/bin/env bash
# The plugin boundary (docs/ARCHITECTURE.md, "The plugin boundary"):
#   - a plugin (plugins/**, sdk/examples/**, the fixture plugins) includes only sdk/ and bpf/
#     headers (included as "omniprof/...") and its own files: no host/
#     header, by whatever name (common/x.h, ../../host/common/x.h, a
#     generated header of the host's build directory);
#   - sdk/ and the installed BPF headers (bpf/include/) include neither
#     host/ nor plugins/;
#   - host/ includes nothing of plugins/ (it reaches them through sdk/);
#   - no plugin target links a target defined in host/ (omniprof_core).
# Each violation is printed as FILE:LINE: what (or, for links, the target
# and through what); the exit status is 1 when there is any.
#
# Usage: check_boundaries.sh SOURCE_DIR BUILD_DIR PLUGIN_LINKS_FILE
# (PLUGIN_LINKS_FILE is written by tests/boundary/CMakeLists.txt at
# configure time.)
set -u
if [[ $# -ne 3 ]]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR PLUGIN_LINKS_FILE" >&2
  exit 2
fi
src=$(realpath -e "$1") || exit 2
build=$(realpath -e "$2") || exit 2
links_file=$3
violations=0

violation() {
  echo "$1"
  violations=$((violations + 1))
}

# A path as the messages show it: relative to the source or build tree.
shown() {
  local path
  path=$(realpath -m "$1")
  case $path in
    "$build"/*) echo "${path#"$build"/} (in the build tree)" ;;
    "$src"/*) echo "${path#"$src"/}" ;;
    *) echo "$path" ;;
  esac
}

# True when `path` (which exists) is at or under directory `dir`.
under() {
  local path dir=$2
  path=$(realpath -e "$1") || return 1
  [[ $path == "$dir" || $path == "$dir"/* ]]
}

# check_includes ROLE FORBIDDEN_NAME_PATTERN ROOT_DIRS FILES...
#   ROLE: what the files are ("plugin", "sdk", "host"), for the messages.
#   FORBIDDEN_NAME_PATTERN: an include naming one of these directories is a
#     violation even if no such file exists (a regex on the include text).
#   ROOT_DIRS: colon-separated; an include that names a file relative to the
#     including file, or relative to one of these roots (the include
#     directories the forbidden side uses), that exists is a violation.
check_includes() {
  local role=$1 name_pattern=$2 roots=$3
  shift 3
  local file line_number text include dir root candidate
  local -a root_list
  IFS=: read -r -a root_list <<< "$roots"
  for file in "$@"; do
    dir=$(dirname "$file")
    while IFS=: read -r line_number text; do
      [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"\<]([^\"\>]+)[\"\>] ]] || continue
      include=${BASH_REMATCH[1]}
      local where=${file#"$src"/}:$line_number
      # Relative to the including file (how "x.h" and "../x.h" resolve first).
      candidate="$dir/$include"
      if [[ -f $candidate ]]; then
        for root in "${root_list[@]}"; do
          if under "$candidate" "$root"; then
            violation "$where: $role file includes \"$include\", which is $(shown "$candidate")"
            continue 2
          fi
        done
      else
        # Relative to a forbidden include directory ("common/result.h" is
        # host/common/result.h).
        for root in "${root_list[@]}"; do
          if [[ -f $root/$include ]]; then
            violation "$where: $role file includes \"$include\", which is $(shown "$root/$include")"
            continue 2
          fi
        done
      fi
      if [[ -n $name_pattern && $include =~ $name_pattern ]]; then
        violation "$where: $role file includes \"$include\", which names a forbidden directory"
      fi
    # A here-string, not < <(...): process substitution needs /dev/fd, which
    # the kernel-matrix guests do not have.
    done <<<"$(grep -nE '^[[:space:]]*#[[:space:]]*include' "$file")"
  done
}

sources_under() {
  local d
  for d in "$@"; do
    [[ -d $d ]] && find "$d" -type f \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) -print
  done | sort
}

# Directories of generated headers under `dir` of the build tree (protobuf
# code, BPF skeletons): include directories of whoever generated them.
generated_dirs() {
  [[ -d $1 ]] && find "$1" -type f -name '*.h' -printf '%h\n' | sort -u | tr '\n' ':'
}
# The host's include directories: host/, its generated headers, and those of
# its own BPF object (entry.skel.h).
host_roots="$src/host:$build/host:$build/bpf:$(generated_dirs "$build/host")$(generated_dirs "$build/bpf")"
host_roots=${host_roots%:}
# A plugin's: plugins/, each plugin's own directory (its include root) and
# its generated headers (skeletons).
# The example plugins (sdk/examples/*) are plugins like the in-tree ones.
plugin_roots="$src/plugins:$build/plugins:$(generated_dirs "$build/plugins")$(generated_dirs "$build/sdk/examples")"
for d in "$src"/plugins/*/ "$build"/plugins/*/ "$src"/sdk/examples/*/ "$build"/sdk/examples/*/; do
  [[ -d $d ]] && plugin_roots+="${d%/}:"
done
plugin_roots=${plugin_roots%:}

# Lines of "$@"'s output as array elements, empty lines dropped (no
# process substitution: see above).
lines_of() {
  local -n into=$1
  shift
  into=()
  local line
  while IFS= read -r line; do [[ -n $line ]] && into+=("$line"); done <<<"$("$@")"
}
# sdk/ without its examples, which are plugins.
sdk_sources() {
  find "$src/sdk" -path "$src/sdk/examples" -prune -o -type f \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' \
    -o -name '*.h' -o -name '*.hpp' \) -print | sort
  sources_under "$src/bpf/include"
}
lines_of plugin_files sources_under "$src/plugins" "$src/sdk/examples" "$src/tests/fixtures/plugins"
lines_of sdk_files sdk_sources
lines_of host_files sources_under "$src/host"
if [[ ${#plugin_files[@]} -eq 0 || ${#sdk_files[@]} -eq 0 || ${#host_files[@]} -eq 0 ]]; then
  echo "no sources found under $src/plugins, $src/sdk or $src/host: wrong SOURCE_DIR?" >&2
  exit 2
fi

check_includes plugin '(^|/)host/' "$host_roots" "${plugin_files[@]}"
check_includes sdk '(^|/)(host|plugins)/' "$host_roots:$plugin_roots" "${sdk_files[@]}"
# host/ has its own plugins/ folder (PluginHost): only what resolves into the
# top-level plugins/ counts, so no name pattern here.
check_includes host '' "$plugin_roots" "${host_files[@]}"

# Links: every target a plugin target links, directly or through others.
if [[ ! -f $links_file ]]; then
  echo "$links_file: missing (written when CMake configures the build)" >&2
  exit 2
fi
plugin_targets=0
while IFS=$'\t' read -r plugin item where via; do
  [[ $plugin == \#* || -z $plugin ]] && continue
  if [[ $item == - ]]; then
    plugin_targets=$((plugin_targets + 1))
    continue
  fi
  through=""
  [[ $via != - ]] && through=" through $via"
  if [[ $where != - ]] && { [[ $where == "$src/host" || $where == "$src/host/"* ]]; }; then
    violation "plugin target $plugin links $item (defined in ${where#"$src"/})$through"
  elif [[ $item =~ (^|[^A-Za-z0-9_])omniprof_(threading_)?core($|[^A-Za-z0-9_]) ]]; then
    violation "plugin target $plugin links $item$through"
  fi
done < "$links_file"
if [[ $plugin_targets -eq 0 ]]; then
  echo "$links_file: lists no plugin target" >&2
  exit 2
fi

if [[ $violations -gt 0 ]]; then
  echo "$violations boundary violation(s): a plugin uses only sdk/ and bpf/ (omniprof_sdk, omniprof_sdk_support); see docs/ARCHITECTURE.md"
  exit 1
fi
echo "boundary kept: ${#plugin_files[@]} plugin, ${#sdk_files[@]} sdk/bpf and ${#host_files[@]} host files, $plugin_targets plugin targets"
