# omniprof_add_plugin(NAME
#                     SOURCES src...          C/C++ sources of the plugin
#                     BPF_SOURCE file.bpf.c   its unwinder, built with bpf_object()
#                     [DATA files...]         shipped under share/omniprof/plugins/NAME
#                     [LINK targets...])      libraries the plugin links (statically, ideally)
#
# Builds NAME.so with hidden visibility and a version script that exports
# only the plugin entry, embeds its BPF object (the skeleton's __elf_bytes),
# and installs it where omniprof looks for plugins. Used in-tree and by
# third-party plugins through the installed SDK (find_package(omniprof-sdk)
# includes this file after setting OMNIPROF_PLUGIN_VERSION_SCRIPT to the
# installed plugin.ver; in the source tree it is ../sdk/plugin.ver).
# The plugin lands in the build tree's lib/omniprof/plugins/ (a directory to
# point `plugins.directories` at) and installs to LIBDIR/omniprof/plugins.
include_guard(GLOBAL)
include(GNUInstallDirs)

if(NOT OMNIPROF_PLUGIN_VERSION_SCRIPT)
  set(OMNIPROF_PLUGIN_VERSION_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/../sdk/plugin.ver)
endif()
if(NOT OMNIPROF_PLUGIN_SUBDIR)
  set(OMNIPROF_PLUGIN_SUBDIR ${CMAKE_INSTALL_LIBDIR}/omniprof/plugins)
endif()
if(NOT OMNIPROF_DATA_SUBDIR)
  set(OMNIPROF_DATA_SUBDIR ${CMAKE_INSTALL_DATADIR}/omniprof)
endif()
if(NOT OMNIPROF_PLUGIN_OUTPUT_DIR)
  set(OMNIPROF_PLUGIN_OUTPUT_DIR ${CMAKE_BINARY_DIR}/${OMNIPROF_PLUGIN_SUBDIR})
endif()

function(omniprof_add_plugin name)
  cmake_parse_arguments(ARG "" "BPF_SOURCE" "SOURCES;DATA;LINK" ${ARGN})
  bpf_object(${name} ${ARG_BPF_SOURCE})
  add_library(${name}_plugin MODULE ${ARG_SOURCES})
  set_target_properties(${name}_plugin PROPERTIES
    OUTPUT_NAME ${name}
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${OMNIPROF_PLUGIN_OUTPUT_DIR})
  target_link_options(${name}_plugin PRIVATE
    -Wl,--version-script=${OMNIPROF_PLUGIN_VERSION_SCRIPT} -Wl,--no-undefined)
  target_link_libraries(${name}_plugin PRIVATE omniprof::sdk ${name}_skel ${ARG_LINK})
  install(TARGETS ${name}_plugin LIBRARY DESTINATION ${OMNIPROF_PLUGIN_SUBDIR} COMPONENT ${name})
  if(ARG_DATA)
    set(data_dir ${CMAKE_BINARY_DIR}/${OMNIPROF_DATA_SUBDIR}/plugins/${name})
    file(MAKE_DIRECTORY ${data_dir})
    foreach(f ${ARG_DATA})
      configure_file(${f} ${data_dir}/ COPYONLY)
    endforeach()
    install(FILES ${ARG_DATA} DESTINATION ${OMNIPROF_DATA_SUBDIR}/plugins/${name} COMPONENT ${name})
  endif()
endfunction()
