# tollgate_add_library(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Adds a static library tollgate_NAME (alias tollgate::NAME), exported and
# linked into the umbrella tollgate::tollgate target.
function(tollgate_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target tollgate_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(tollgate::${name} ALIAS ${target})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME tollgate_${name})
  install(TARGETS ${target} EXPORT tollgateTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY TOLLGATE_LIBRARIES ${target})
endfunction()

# tollgate_add_test(NAME SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s] [BINARY BIN [UNITY G]])
# A GoogleTest binary registered with CTest. Label "concurrency" puts it in the
# TSan run of `make sanitize`; "integration" marks tests that start servers;
# "timing" marks tests whose outcome depends on time (real clocks, deadlines,
# threads), which `make test-stress` runs beside busy CPUs (tools/stress.sh).
#
# BINARY BIN: the sources go into the test binary BIN that several ctest entries share (one per
# folder: the shared headers are compiled and linked once, not once per entry); ctest entry NAME
# runs BIN with --tollgate_sources=<its SOURCES> and so only the tests those files define
# (tests/testing/group_main.cc), with its own labels, timeout and COST. A target NAME still exists
# (a utility target building BIN): `ninja NAME`, add_dependencies(NAME ...) and
# tollgate_test_program work on it; compile settings go on BIN. With TOLLGATE_TEST_UNITY (default)
# BIN's sources are compiled as one unity TU per group G (default: BIN); files whose file-local
# names clash go in different groups. A new test needs none of this: without BINARY it is its
# own binary, as before (UNITY ON: its own sources as one unity TU).
#
# A shared test helper (tests/server/test_http.cc, tests/testing/redis_server.cc, ...; the list
# below) named in SOURCES is not compiled into the test: the test links the helper's support
# library (tests/testing/CMakeLists.txt), so each helper is compiled once per build tree, not
# once per test binary and per test's compile definitions (which ccache cannot share).
function(tollgate_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;BINARY;UNITY" "SOURCES;LIBS;LABELS" ${ARGN})
  get_property(support_map GLOBAL PROPERTY TOLLGATE_TEST_SUPPORT)
  set(sources "")
  set(support_libs "")
  foreach(src ${ARG_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${abs})
    list(FIND support_map ${rel} at)
    if(at GREATER -1)
      math(EXPR at "${at} + 1")
      list(GET support_map ${at} lib)
      if(TARGET ${lib})
        list(APPEND support_libs ${lib})
        continue()
      endif()
    endif()
    list(APPEND sources ${abs})
  endforeach()
  if(ARG_BINARY)
    set(target ${ARG_BINARY})
    if(NOT TARGET ${target})
      add_executable(${target})
      tollgate_test_target(${target})
      target_link_libraries(${target} PRIVATE tollgate_test_group_main)
      if(TOLLGATE_TEST_UNITY)
        set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
      endif()
    endif()
    target_sources(${target} PRIVATE ${sources})
    if(NOT ARG_UNITY)
      set(ARG_UNITY ${target})
    endif()
    set_source_files_properties(${sources} TARGET_DIRECTORY ${target} PROPERTIES
      UNITY_GROUP ${target}_${ARG_UNITY})
    set(selection "")
    foreach(src ${sources})
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
      list(APPEND selection ${rel})
    endforeach()
    list(JOIN selection "," selection)
    add_custom_target(${name})
    add_dependencies(${name} ${target})
    add_test(NAME ${name} COMMAND ${target} --tollgate_sources=${selection})
  else()
    set(target ${name})
    add_executable(${target} ${sources})
    tollgate_test_target(${target})
    target_link_libraries(${target} PRIVATE GTest::gtest_main)
    if(ARG_UNITY AND TOLLGATE_TEST_UNITY)
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
    endif()
    add_test(NAME ${name} COMMAND ${target})
  endif()
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} ${support_libs})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "TOLLGATE_SOURCE_DIR=${PROJECT_SOURCE_DIR};TOLLGATE_BINARY_DIR=${PROJECT_BINARY_DIR}")
  tollgate_test_cost(${name})
endfunction()

# tollgate_test_target(TARGET): what every test executable is compiled and linked with.
function(tollgate_test_target target)
  tollgate_test_compile_options(${target})
  tollgate_reuse_test_pch(${target})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${target} PRIVATE GTest::gtest GTest::gmock Threads::Threads)
endfunction()

# tollgate_test_program(TEST VARIABLE TARGET): test TEST runs the program TARGET, found at run
# time in the environment variable VARIABLE (tests/testing/test_paths.h, ProgramPath), not in a
# compile definition: a path compiled in would make the test's TU differ per clone for ccache.
function(tollgate_test_program test variable target)
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT "${variable}=$<TARGET_FILE:${target}>")
  add_dependencies(${test} ${target})
endfunction()

# tollgate_test_cost(NAME): the COST of test NAME from the table of long tests in
# tests/CMakeLists.txt (TOLLGATE_TEST_COSTS, seconds). `ctest -j` starts the costliest tests
# first; it takes the costs from the build's Testing/Temporary/CTestCostData.txt once a run wrote
# one, and from COST before that (a clean clone: CI), where it would otherwise start them in the
# order they were added and leave the longest to run alone at the end. tollgate_add_test calls
# it; a test added by add_test calls it after.
function(tollgate_test_cost name)
  get_property(costs GLOBAL PROPERTY TOLLGATE_TEST_COSTS)
  list(FIND costs ${name} at)
  if(at GREATER -1)
    math(EXPR at "${at} + 1")
    list(GET costs ${at} seconds)
    set_tests_properties(${name} PROPERTIES COST ${seconds})
  endif()
endfunction()

# tollgate_add_test_support(LIB SOURCE): SOURCE (relative to the project root) is a shared test
# helper compiled into the support library LIB; tollgate_add_test links LIB for it.
function(tollgate_add_test_support lib source)
  set_property(GLOBAL APPEND PROPERTY TOLLGATE_TEST_SUPPORT ${source} ${lib})
endfunction()

# tollgate_precompile_headers(TARGET HEADER...): precompiles HEADERs for TARGET when TOLLGATE_PCH
# is on (GCC), and forces them into each of its sources. <utility> is always the first: Boost
# 1.74's awaitable.hpp needs it, which tollgated_lib otherwise supplies by `-include utility`
# (and an -include before the PCH's would silently keep GCC from using the PCH).
function(tollgate_precompile_headers target)
  if(TOLLGATE_PCH)
    target_precompile_headers(${target} PRIVATE <utility> ${ARGN})
    set_target_properties(${target} PROPERTIES TOLLGATE_PCH_UTILITY ON)
  endif()
endfunction()

# tollgate_reuse_test_pch(TARGET): TARGET (a test) uses the tests' shared PCH (GoogleTest,
# nlohmann-json; tests/testing/CMakeLists.txt), compiled once per build tree.
function(tollgate_reuse_test_pch target)
  if(TOLLGATE_PCH AND TARGET tollgate_test_pch)
    target_precompile_headers(${target} REUSE_FROM tollgate_test_pch)
    set_target_properties(${target} PROPERTIES TOLLGATE_PCH_UTILITY ON)
    # A PCH is used only where the macros its headers test are the same as when it was made
    # (else -Winvalid-pch, an error under -Werror): -pthread defines _REENTRANT, which some tests
    # got from their libraries and some not. Every test and the PCH get it.
    target_compile_options(${target} PRIVATE -pthread)
  endif()
endfunction()

# tollgate_test_compile_options(TARGET): what every test target (and the tests' PCH) is compiled
# with beyond the tree's flags. TOLLGATE_TEST_LINE_TABLES (CI): line tables only (-g1) instead of
# full debug info; backtraces and sanitizer reports keep their file:line, a test TU compiles in
# about three quarters of the time and links smaller.
#
# TOLLGATE_TEST_FAST_COMPILE (default): the test's own code at -O1 in RelWithDebInfo and Release
# trees, at -O0 in the fuzz tree (TOLLGATE_FUZZ: clang, ASan+UBSan, everything else at -O1); the
# libraries a test links keep their tree's flags. In the fuzz tree a test TU gets ASan+UBSan but
# not libFuzzer's coverage instrumentation, which only the code a fuzz target reaches needs.
function(tollgate_test_compile_options target)
  if(TOLLGATE_TEST_LINE_TABLES)
    target_compile_options(${target} PRIVATE $<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
  endif()
  if(TOLLGATE_FUZZ)
    target_compile_options(${target} PRIVATE -fno-sanitize=fuzzer-no-link)
    if(TOLLGATE_TEST_FAST_COMPILE)
      target_compile_options(${target} PRIVATE -O0)
    endif()
  elseif(TOLLGATE_TEST_FAST_COMPILE)
    target_compile_options(${target} PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-O1>)
  endif()
endfunction()
