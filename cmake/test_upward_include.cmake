# CTest layers.upward_include_fails_build: configures a copy of the library's sources in which
# lathe/kernels/loop.h includes an ops header (a layer above kernels), builds the copy's kernels
# layer and expects the build to fail with the layer check's message. The tree itself is untouched.
# Usage: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch dir> -P test_upward_include.cmake
cmake_minimum_required(VERSION 3.20)
set(src ${WORK_DIR}/src)
set(bin ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${src})
file(COPY ${SOURCE_DIR}/CMakeLists.txt ${SOURCE_DIR}/cmake ${SOURCE_DIR}/lathe DESTINATION ${src})

set(victim ${src}/lathe/kernels/loop.h)
file(READ ${victim} text)
string(REPLACE "#pragma once\n" "#pragma once\n#include \"lathe/ops/op_def.h\"\n" injected "${text}")
if(injected STREQUAL text)
  message(FATAL_ERROR "could not inject the include into ${victim}")
endif()
file(WRITE ${victim} "${injected}")
string(FIND "${injected}" "#include \"lathe/ops/op_def.h\"" pos)
string(SUBSTRING "${injected}" 0 ${pos} before)
string(REGEX MATCHALL "\n" newlines "${before}")
list(LENGTH newlines line)
math(EXPR line "${line} + 1")

execute_process(COMMAND ${CMAKE_COMMAND} -S ${src} -B ${bin} -G Ninja
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the copy failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${bin} --target lathe_kernels
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
set(expected "lathe/kernels/loop.h:${line}: error: layer 'kernels' includes lathe/ops/")
if(rc EQUAL 0)
  message(FATAL_ERROR "the build of lathe_kernels succeeded despite an upward include:\n${out}")
endif()
string(FIND "${out}" "${expected}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "the build failed, but not with \"${expected}\":\n${out}")
endif()
message(STATUS "the build failed as expected:\n${out}")
file(REMOVE_RECURSE ${WORK_DIR})
