# bpf_object(NAME SOURCE [INCLUDES dir...])
#
# Compiles SOURCE with clang for the BPF target (CO-RE, BTF) and generates a
# libbpf skeleton. Gives an INTERFACE target NAME_skel whose include directory
# holds NAME.skel.h; the skeleton embeds the object (NAME_bpf__elf_bytes()).
find_program(BPF_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
#
# Used in the source tree (cmake/, beside bpf/include) and from the installed
# SDK (omniprof-sdkConfig.cmake sets OMNIPROF_BPF_INCLUDE_DIR to the
# installed include directory before including this file).
include_guard(GLOBAL)
find_package(PkgConfig REQUIRED)
if(NOT TARGET PkgConfig::LIBBPF)
  pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf>=1.0)
endif()
# A plugin project may enable only CXX: ask whichever compiler it has.
if(CMAKE_C_COMPILER)
  set(omniprof_multiarch_compiler ${CMAKE_C_COMPILER})
else()
  set(omniprof_multiarch_compiler ${CMAKE_CXX_COMPILER})
endif()
execute_process(COMMAND ${omniprof_multiarch_compiler} -print-multiarch
                OUTPUT_VARIABLE OMNIPROF_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE)

if(NOT OMNIPROF_BPF_INCLUDE_DIR)
  set(OMNIPROF_BPF_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR}/../bpf/include)
endif()

function(bpf_object name source)
  cmake_parse_arguments(ARG "" "" "INCLUDES;DEPENDS" ${ARGN})
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/bpf)
  set(obj ${out_dir}/${name}.bpf.o)
  set(skel ${out_dir}/${name}.skel.h)
  set(include_flags -I${OMNIPROF_BPF_INCLUDE_DIR})
  foreach(dir ${ARG_INCLUDES})
    list(APPEND include_flags -I${dir})
  endforeach()
  if(OMNIPROF_MULTIARCH)
    list(APPEND include_flags -idirafter /usr/include/${OMNIPROF_MULTIARCH})
  endif()
  file(GLOB bpf_headers ${OMNIPROF_BPF_INCLUDE_DIR}/omniprof/bpf/*.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror
            ${include_flags} -c ${CMAKE_CURRENT_SOURCE_DIR}/${source} -o ${obj}
    DEPENDS ${source} ${bpf_headers} ${ARG_DEPENDS}
    COMMENT "BPF ${name}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}
    DEPENDS ${obj}
    COMMENT "BPF skeleton ${name}"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${out_dir})
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()
