# omniprof_install_config(FILES f... [SUBDIR dir] COMPONENT c)
#
# Installs configuration files under omniprof's configuration directory:
# /etc/omniprof[/SUBDIR] when the install prefix is /usr (the packages:
# cmake/Packaging.cmake installs with prefix /usr into a DESTDIR), else
# PREFIX/etc/omniprof[/SUBDIR]. The choice is made at install time, not at
# configure time, so that `cmake --install build --prefix /tmp/x` (the
# install tests) never writes to the machine's /etc, while the packages put
# the files where the agent reads them (kDefaultConfigDirectory, /etc/omniprof).
include_guard(GLOBAL)

function(omniprof_install_config)
  cmake_parse_arguments(ARG "" "SUBDIR;COMPONENT" "FILES" ${ARGN})
  if(NOT ARG_COMPONENT OR NOT ARG_FILES)
    message(FATAL_ERROR "omniprof_install_config: FILES and COMPONENT are required")
  endif()
  set(files "")
  foreach(f ${ARG_FILES})
    get_filename_component(f "${f}" ABSOLUTE)
    if(NOT EXISTS "${f}")
      message(FATAL_ERROR "omniprof_install_config: ${f} does not exist")
    endif()
    string(APPEND files " \"${f}\"")
  endforeach()
  set(subdir "omniprof")
  if(ARG_SUBDIR)
    set(subdir "omniprof/${ARG_SUBDIR}")
  endif()
  install(CODE "
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" OR CMAKE_INSTALL_PREFIX STREQUAL \"/\")
      set(_omniprof_etc \"/etc/${subdir}\")
    else()
      set(_omniprof_etc \"\${CMAKE_INSTALL_PREFIX}/etc/${subdir}\")
    endif()
    file(INSTALL DESTINATION \"\${_omniprof_etc}\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES${files})"
    COMPONENT ${ARG_COMPONENT})
endfunction()
