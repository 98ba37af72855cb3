# cmake -P script run by the embed_find_package_test CTest test.
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, CXX, LAUNCHER (the build's compiler
# launcher, ccache or empty: the examples' objects are cached like the build's own).
cmake_minimum_required(VERSION 3.25)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 600)
  message(STATUS "$ ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(PREFIX ${WORK_DIR}/prefix)

# 1. Install the current build (libraries, headers, CMake package, pkg-config).
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
foreach(f include/tollgate/limiter.h include/tollgate/client.h include/tollgate/middleware/httplib.h
          include/tollgate/middleware/beast.h)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB_RECURSE config_files ${PREFIX}/*/tollgateConfig.cmake)
file(GLOB_RECURSE pc_files ${PREFIX}/*/tollgate.pc)
if(NOT config_files OR NOT pc_files)
  message(FATAL_ERROR "CMake package or pkg-config file missing under ${PREFIX}")
endif()

# 2. A separate project: find_package(tollgate) against the installed tree only.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/embed -B ${WORK_DIR}/embed -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/embed -j 2)
run(${WORK_DIR}/embed/embed_limiter)
if(NOT LAST_OUTPUT MATCHES "embed example: ok")
  message(FATAL_ERROR "embed_limiter did not report ok")
endif()
if(EXISTS ${WORK_DIR}/embed/embed_httplib)
  run(${WORK_DIR}/embed/embed_httplib)
  if(NOT LAST_OUTPUT MATCHES "httplib example: ok")
    message(FATAL_ERROR "embed_httplib did not report ok")
  endif()
endif()

if(EXISTS ${WORK_DIR}/embed/embed_beast)
  run(${WORK_DIR}/embed/embed_beast)
  if(NOT LAST_OUTPUT MATCHES "beast example: ok")
    message(FATAL_ERROR "embed_beast did not report ok")
  endif()
endif()

# 3. The libcurl client example builds against the installed tree too.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/client -B ${WORK_DIR}/client -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/client -j 2)

# 4. pkg-config: compile and run a program with only the flags the .pc file gives.
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
find_program(PKG_CONFIG pkg-config REQUIRED)
run(${PKG_CONFIG} --cflags --libs tollgate)
string(STRIP "${LAST_OUTPUT}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
file(WRITE ${WORK_DIR}/pc_main.cc [=[
#include <tollgate/limiter.h>
#include <cstdio>
int main() {
  auto l = tollgate::Limiter::Create({.limit = {.rate = 1, .burst = 1}});
  if (!l.ok() || !(*l)->TryAcquire("k") || (*l)->TryAcquire("k")) return 1;
  std::puts("pkg-config example: ok");
  return 0;
}
]=])
run(${CXX} ${WORK_DIR}/pc_main.cc -o ${WORK_DIR}/pc_main ${pc_flags})
run(${WORK_DIR}/pc_main)
message(STATUS "find_package, examples and pkg-config all work against ${PREFIX}")
