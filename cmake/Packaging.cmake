# The Debian packages (CPack, `cpack -G DEB` in the build directory), one per
# install component (docs/packaging.md):
#   host     -> omniprof          the binary, /etc/omniprof/omniprof.yaml, the systemd unit
#   native   -> omniprof-native   \
#   python   -> omniprof-python    | a plugin each: <runtime>.so, its data files,
#   ruby     -> omniprof-ruby      | /etc/omniprof/conf.d/50-<runtime>.yaml
#   perfmap  -> omniprof-perfmap  /  (sdk/examples/perfmap, when it is built)
#   dev      -> omniprof-dev      the SDK (headers, helper library, CMake package)
# Included last from the top-level CMakeLists.txt, after every install rule:
# a package is made only for a component that has install rules, so a part
# not in this tree yet (perfmap, the SDK's `dev` rules) is simply no package.
include_guard(GLOBAL)

# The project has no mail address: .invalid (RFC 2606) says so and passes
# lintian's syntax check; a distributor sets its own.
set(OMNIPROF_PACKAGE_MAINTAINER "omniprof developers <omniprof@packages.omniprof.invalid>"
    CACHE STRING "Maintainer field of the Debian packages (also in cmake/packaging/changelog)")
set(OMNIPROF_PLUGIN_COMPONENTS native python ruby perfmap)
set(OMNIPROF_PACKAGE_COMPONENTS host ${OMNIPROF_PLUGIN_COMPONENTS} dev)

# Each plugin package enables its runtime with a drop-in kept in the
# plugin's own folder: <plugin source dir>/conf.d/50-<runtime>.yaml.
foreach(plugin ${OMNIPROF_PLUGIN_COMPONENTS})
  if(NOT TARGET ${plugin}_plugin)
    continue()
  endif()
  get_target_property(plugin_source_dir ${plugin}_plugin SOURCE_DIR)
  set(drop_in ${plugin_source_dir}/conf.d/50-${plugin}.yaml)
  if(EXISTS ${drop_in})
    omniprof_install_config(FILES ${drop_in} SUBDIR conf.d COMPONENT ${plugin})
    set(OMNIPROF_${plugin}_CONFFILES /etc/omniprof/conf.d/50-${plugin}.yaml)
  else()
    message(WARNING "${drop_in} is missing: the omniprof-${plugin} package will not enable its runtime")
  endif()
endforeach()
set(OMNIPROF_host_CONFFILES /etc/omniprof/omniprof.yaml)

# The components that have install rules now. Rules without a component
# ("Unspecified") belong to no package: say so rather than drop them quietly.
get_cmake_property(installed_components COMPONENTS)
set(CPACK_COMPONENTS_ALL "")
foreach(component ${OMNIPROF_PACKAGE_COMPONENTS})
  if(component IN_LIST installed_components)
    list(APPEND CPACK_COMPONENTS_ALL ${component})
  endif()
endforeach()
set(unpackaged ${installed_components})
list(REMOVE_ITEM unpackaged ${OMNIPROF_PACKAGE_COMPONENTS})
if(unpackaged)
  message(STATUS "Packaging: install components in no Debian package: ${unpackaged}")
endif()
message(STATUS "Packaging: Debian packages for the components ${CPACK_COMPONENTS_ALL}")

# The version, as a native Debian version (no revision: the packages are
# made from this tree, not from an upstream tarball). The changelog's newest
# entry must carry it.
set(OMNIPROF_PACKAGE_VERSION ${PROJECT_VERSION})
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/packaging/changelog changelog_head LIMIT_COUNT 1)
if(NOT changelog_head MATCHES "^omniprof \\(${OMNIPROF_PACKAGE_VERSION}\\) ")
  message(FATAL_ERROR "cmake/packaging/changelog: the newest entry is '${changelog_head}', "
                      "not version ${OMNIPROF_PACKAGE_VERSION} (project() in CMakeLists.txt): add an entry")
endif()

# Per package: /usr/share/doc/PKG/copyright and changelog.gz (gzip -9n, as
# Debian policy wants), the conffiles list for dpkg.
set(package_doc_dir ${CMAKE_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${package_doc_dir})
execute_process(COMMAND gzip -9 -n -c ${CMAKE_CURRENT_LIST_DIR}/packaging/changelog
                OUTPUT_FILE ${package_doc_dir}/changelog.gz RESULT_VARIABLE gzip_result)
if(NOT gzip_result EQUAL 0)
  message(FATAL_ERROR "gzip of cmake/packaging/changelog failed: ${gzip_result}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/packaging/changelog)

foreach(component ${CPACK_COMPONENTS_ALL})
  string(TOUPPER ${component} upper)
  if(component STREQUAL "host")
    set(package omniprof)
  else()
    set(package omniprof-${component})
  endif()
  set(CPACK_DEBIAN_${upper}_PACKAGE_NAME ${package})
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/packaging/copyright ${package_doc_dir}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
  if(OMNIPROF_${component}_CONFFILES)
    list(JOIN OMNIPROF_${component}_CONFFILES "\n" conffiles)
    file(MAKE_DIRECTORY ${package_doc_dir}/${component})
    file(WRITE ${package_doc_dir}/${component}/conffiles "${conffiles}\n")
    set(CPACK_DEBIAN_${upper}_PACKAGE_CONTROL_EXTRA ${package_doc_dir}/${component}/conffiles)
  endif()
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_PACKAGE_NAME omniprof)
set(CPACK_PACKAGE_VENDOR "omniprof")
set(CPACK_PACKAGE_VERSION ${OMNIPROF_PACKAGE_VERSION})
set(CPACK_PACKAGE_CONTACT "${OMNIPROF_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
# Installed with prefix /usr into a DESTDIR, so that an absolute destination
# lands in the package too and omniprof_install_config (cmake/
# OmniprofConfigInstall.cmake) puts the configuration in /etc.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME omniprof)
set(CPACK_DEBIAN_PACKAGE_SOURCE omniprof)
set(CPACK_DEBIAN_PACKAGE_VERSION ${OMNIPROF_PACKAGE_VERSION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${OMNIPROF_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Run-time dependencies from the ELF files themselves (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_HOST_PACKAGE_SECTION devel)
set(CPACK_COMPONENT_HOST_DESCRIPTION "whole-system CPU profiler for Linux (eBPF, pprof output)
omniprof samples every CPU with eBPF and writes pprof profiles: `omniprof
record` for a session, `omniprof run` (the omniprof.service systemd unit,
not enabled by default) for continuous profiling. Unwinders are plugins,
one package each: omniprof-native (compiled code), omniprof-python,
omniprof-ruby, omniprof-perfmap (JIT code from /tmp/perf-PID.map files).")
# Suggests, not Recommends: the host runs (kernel frames only) without them.
set(CPACK_DEBIAN_HOST_PACKAGE_SUGGESTS "omniprof-native, omniprof-python, omniprof-ruby, omniprof-perfmap")

set(plugin_summary_native "native unwinder for omniprof (DWARF CFI, frame pointers)")
set(plugin_long_native "Walks the stacks of compiled programs with unwind tables built from
their DWARF call-frame information (loaded into BPF maps), and with frame
pointers where no table covers the code.")
set(plugin_summary_python "Python unwinder for omniprof (CPython 2.7, 3.6 to 3.13)")
set(plugin_long_python "Names the Python frames of CPython processes: function, file and line,
spliced into the native stack where the interpreter runs them.")
set(plugin_summary_ruby "Ruby unwinder for omniprof (CRuby 2.6 to 3.4)")
set(plugin_long_ruby "Names the Ruby frames of CRuby processes (Foo#bar, blocks, C methods),
with file and line, spliced into the native stack.")
set(plugin_summary_perfmap "JIT frame namer for omniprof (perf-PID.map files)")
set(plugin_long_perfmap "Names JIT-compiled frames from the /tmp/perf-PID.map files that Node.js
(--perf-basic-prof), the JVM with a perf-map agent, .NET and LuaJIT write.")
foreach(plugin ${OMNIPROF_PLUGIN_COMPONENTS})
  string(TOUPPER ${plugin} upper)
  set(CPACK_COMPONENT_${upper}_DESCRIPTION "${plugin_summary_${plugin}}
${plugin_long_${plugin}}
The package enables the ${plugin} runtime with
/etc/omniprof/conf.d/50-${plugin}.yaml.")
  set(CPACK_DEBIAN_${upper}_PACKAGE_SECTION devel)
  # The plugin ABI a host speaks is the host's own: the same version only.
  set(CPACK_DEBIAN_${upper}_PACKAGE_DEPENDS "omniprof (= ${OMNIPROF_PACKAGE_VERSION})")
endforeach()

set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "SDK for omniprof unwinder plugins
The plugin C ABI (omniprof/plugin.h) and its C++ helpers, the BPF ABI
headers, the static helper library omniprof_sdk_support, and the CMake
package (find_package(omniprof-sdk), omniprof_add_plugin) and pkg-config
file that build a third-party plugin against them.")
# Build-time only: what the SDK's headers and CMake package use. No run-time
# dependency (not even on the host: a plugin can be built without it).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libbpf-dev (>= 1:1.0), libelf-dev")

include(CPack)
