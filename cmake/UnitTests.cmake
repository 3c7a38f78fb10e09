# How googletest binaries become ctest entries.
#
# omniprof_add_gtest_entry(NAME name COMMAND command...): one ctest entry
# that runs a whole gtest binary, or the tests of it a --gtest_filter picks,
# through cmake/run_gtest_entry.sh. gtest exits 0 when all it ran were
# skipped and when its filter matched nothing; through the script a skip
# shows as skipped (exit 77, SKIP_RETURN_CODE) and an entry that ran no test
# fails. COMMAND names the binary with $<TARGET_FILE:target>. Every entry
# that runs more than one gtest test, or runs tests by a filter, is made
# with it (tests/CMakeLists.txt, UnitSuite.* below); gtest_discover_tests'
# one-test entries need not: each is one test the binary listed, and
# CMake's own SKIP_REGULAR_EXPRESSION shows its skip.
#
# omniprof_discover_unit_tests(TARGET): the ctest entries of one gtest unit
# test binary, two ways.
#
# - One entry per test (label `unit`), discovered from the binary: what
#   scripts/test.sh runs on the host, where a failure names its test.
# - One entry for the whole binary, UnitSuite.TARGET (label
#   `unit_suite`): what the kernel-matrix guests run instead
#   (scripts/kernel-matrix/guest-suite.sh). Under emulation every process
#   start costs about a second. Used for the suites that read live processes
#   through the kernel (the Python and Ruby plugins' readers: /proc,
#   process_vm_readv); they start each interpreter, which also fills the
#   guest's 9p page cache with the files the e2e entries read next
#   (docs/kernel-matrix.md). omniprof_unit_tests, which exercises no kernel
#   interface, runs on the host only.
#
# scripts/test.sh leaves the unit_suite entries out (-LE unit_suite): on the
# host they would run every test a second time.
include(GoogleTest)

set(OMNIPROF_GTEST_ENTRY_RUNNER ${CMAKE_CURRENT_LIST_DIR}/run_gtest_entry.sh)

function(omniprof_add_gtest_entry)
  cmake_parse_arguments(PARSE_ARGV 0 entry "" "NAME" "COMMAND")
  if(NOT entry_NAME OR NOT entry_COMMAND OR entry_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "omniprof_add_gtest_entry(NAME name COMMAND command...): got '${ARGV}'")
  endif()
  add_test(NAME ${entry_NAME} COMMAND bash ${OMNIPROF_GTEST_ENTRY_RUNNER} ${entry_COMMAND})
  set_tests_properties(${entry_NAME} PROPERTIES SKIP_RETURN_CODE 77)
endfunction()

# How test code compiles (the gtest binaries' own sources; the code they test
# is built as everywhere else): -O0 with line tables. Measured on 2026-12-06
# with ninja's log: the 73 objects of the test binaries took 698 s of CPU
# against 1293 s at -O2 -g (tests/unit/elf_symbolizer_test.cpp alone: 13 s
# against 41 s); they were half of a fresh build's compile time, and CI builds
# from scratch. Later options win, so these override the build type's
# optimization and debug level for those sources only.
set(OMNIPROF_TEST_COMPILE_OPTIONS "-O0;-g1" CACHE STRING "compile options of the test binaries' own sources")
function(omniprof_test_code target)
  target_compile_options(${target} PRIVATE ${OMNIPROF_TEST_COMPILE_OPTIONS})
endfunction()

function(omniprof_discover_unit_tests target)
  omniprof_test_code(${target})
  gtest_discover_tests(${target} PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
  omniprof_add_gtest_entry(NAME UnitSuite.${target} COMMAND $<TARGET_FILE:${target}>)
  set_tests_properties(UnitSuite.${target} PROPERTIES LABELS unit_suite)
endfunction()

# omniprof_add_unit_suite(TARGET DIRECTORY DIR LINK LIBS... DEFINITIONS DEFS...):
# a gtest binary of every .cpp in DIR (a plugin's tests under tests/unit/),
# linked with LIBS and gtest_main, its ctest entries as above.
function(omniprof_add_unit_suite target)
  cmake_parse_arguments(PARSE_ARGV 1 suite "" "DIRECTORY" "LINK;DEFINITIONS")
  file(GLOB sources CONFIGURE_DEPENDS ${suite_DIRECTORY}/*.cpp)
  add_executable(${target} ${sources})
  target_link_libraries(${target} PRIVATE ${suite_LINK} GTest::gtest_main)
  target_compile_definitions(${target} PRIVATE ${suite_DEFINITIONS})
  omniprof_discover_unit_tests(${target})
endfunction()

# omniprof_add_plugin_library(TARGET SOURCES...): the part of an in-tree
# plugin that its unit suite tests (no BPF), which its .so links too: a
# static, position-independent library of SOURCES on the SDK and yaml-cpp.
function(omniprof_add_plugin_library target)
  add_library(${target} STATIC ${ARGN})
  target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC omniprof_sdk omniprof_sdk_support yaml-cpp)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
