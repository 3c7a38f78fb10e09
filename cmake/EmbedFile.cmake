# cmake -DINPUT=FILE -DOUTPUT=FILE.cpp -DSYMBOL=kName -P EmbedFile.cmake
#
# Writes a C++ source defining omniprof::embedded::SYMBOL (the bytes of
# INPUT) and SYMBOLSize, so a file the binary needs (the flamegraph page's
# template) is part of it: nothing to install beside it, nothing to find at
# run time. Run at build time (add_custom_command), so editing INPUT
# rebuilds.
foreach(var INPUT OUTPUT SYMBOL)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "EmbedFile.cmake: ${var} not set")
  endif()
endforeach()
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
# One line per 32 bytes keeps the generated file readable in an editor.
string(REGEX REPLACE "((('[^']*',){32}))" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/EmbedFile.cmake: do not edit.\n"
  "#include <cstddef>\n"
  "namespace omniprof::embedded {\n"
  "extern const char ${SYMBOL}[];\n"
  "extern const size_t ${SYMBOL}Size;\n"
  "const char ${SYMBOL}[] = {\n  ${bytes}'\\0'};\n"
  "const size_t ${SYMBOL}Size = ${size};\n"
  "}  // namespace omniprof::embedded\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
