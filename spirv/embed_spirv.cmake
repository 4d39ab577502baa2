# cmake -DIN=x.spv -DOUT=x.cpp -DNAME=x -P embed_spirv.cmake: writes the SPIR-V words as a uint32 array.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" len)
math(EXPR rem "${len} % 8")
if(len EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${IN}: not a SPIR-V module (${len} hex digits)")
endif()
math(EXPR words "${len} / 8")
# SPIR-V files are little-endian words: bytes b0 b1 b2 b3 -> 0xb3b2b1b0.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u,\n" body "${hex}")
file(WRITE ${OUT} "// Generated from ${IN}: do not edit.\n#include <cstddef>\n#include <cstdint>\n"
  "namespace alpha::spirv {\nextern const uint32_t spv_${NAME}[];\nextern const size_t spv_${NAME}_words;\n"
  "const uint32_t spv_${NAME}[] = {\n${body}};\nconst size_t spv_${NAME}_words = ${words};\n}\n")
