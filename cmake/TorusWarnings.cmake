# Warnings as errors for Torus code only; third-party headers come in as SYSTEM through imported targets.
add_library(torus_warnings INTERFACE)
target_compile_options(torus_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TORUS_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${TORUS_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>)
# A unity build (CMAKE_UNITY_BUILD, scripts/demo.sh's build-demo/) #includes each .cc into one file, so GCC takes a
# .cc's class whose member has an anonymous-namespace type for a header's and warns (-Wsubobject-linkage); the
# class still lives in one translation unit, so the warning is a false alarm there.
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(torus_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
endif()

# __FILE__ relative to the repository root, so log lines and error messages read "worker/nn/conv.cc:12".
target_compile_options(torus_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>)

# torus_target(<name>): the standard settings for a Torus library or executable.
function(torus_target name)
  target_link_libraries(${name} PRIVATE torus_warnings)
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# torus_add_subdirs(): add every child folder that has a CMakeLists.txt, so each area owns its own build file.
# TORUS_EXCLUDE_DIRS (e.g. "tests/apiserver;worker/comm") leaves areas out of a partial build.
set(TORUS_EXCLUDE_DIRS "" CACHE STRING "Folders (relative to the source root) left out of the build")
function(torus_add_subdirs)
  file(GLOB children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*/CMakeLists.txt)
  list(SORT children)
  file(RELATIVE_PATH here ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  foreach(child ${children})
    get_filename_component(dir ${child} DIRECTORY)
    if(here)
      set(rel "${here}/${dir}")
    else()
      set(rel "${dir}")
    endif()
    if(NOT rel IN_LIST TORUS_EXCLUDE_DIRS)
      add_subdirectory(${dir})
    endif()
  endforeach()
endfunction()

# torus_gtest(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>] [RESOURCE_LOCK <names...>]
#             [TIMEOUT <s>] [ISA <isa>] [ALSO_ISA <isa>])
# One GoogleTest binary; each TEST becomes a CTest test. GTEST_SKIP() shows up as "skipped" in CTest.
# ISA pins oneDNN's instruction set (ONEDNN_MAX_CPU_ISA) for every test of the binary; ALSO_ISA registers each test
# a second time, suffixed ".<isa>", under that instruction set: machines differ (an AMD EPYC has AVX2 and no
# AVX-512) and oneDNN picks other kernels on each, so the CPU engine's tests run the kernels of both kinds.
# TORUS_ONLY_TESTS (a list of binaries) registers only those; the others stay defined but unbuilt (the sanitizer
# lane runs the CPU code's unit tests, not the end-to-end ones).
set(TORUS_ONLY_TESTS "" CACHE STRING "Test binaries to register (empty: all)")
# The clients the tests drive the API stand-in with: the project's pinned copies (scripts/lib.sh,
# torus_install_kube_tools), not whatever kubectl a machine happens to have.
set(TORUS_KUBECTL "${PROJECT_SOURCE_DIR}/.tools/bin/kubectl" CACHE FILEPATH "kubectl the tests run")
set(TORUS_HELM "${PROJECT_SOURCE_DIR}/.tools/bin/helm" CACHE FILEPATH "helm the tests run")
function(torus_gtest name)
  cmake_parse_arguments(T "" "TIMEOUT;ISA;ALSO_ISA" "SOURCES;LIBS;LABELS;RESOURCE_LOCK;FIXTURES" ${ARGN})
  if(TORUS_ONLY_TESTS AND NOT name IN_LIST TORUS_ONLY_TESTS)
    add_executable(${name} EXCLUDE_FROM_ALL ${T_SOURCES})
    torus_target(${name})
    target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  torus_target(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE TORUS_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             TORUS_BINARY_DIR="${PROJECT_BINARY_DIR}"
                                             TORUS_KUBECTL="${TORUS_KUBECTL}" TORUS_HELM="${TORUS_HELM}")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # No test may reach beyond this machine: every connection the code under test opens is checked against
  # loopback (common/util/destination.h), in the test process and in every process it starts.
  set(props TIMEOUT ${T_TIMEOUT} ENVIRONMENT TORUS_LOOPBACK_ONLY=1)
  if(T_LABELS)
    list(APPEND props LABELS "${T_LABELS}")
  endif()
  if(T_RESOURCE_LOCK)
    list(APPEND props RESOURCE_LOCK "${T_RESOURCE_LOCK}")
  endif()
  # What the tests need made first, by a setup test (e.g. product_images: the images scripts/images.sh builds).
  if(T_FIXTURES)
    list(APPEND props FIXTURES_REQUIRED "${T_FIXTURES}")
  endif()
  if(T_ISA)
    list(APPEND props ENVIRONMENT_MODIFICATION ONEDNN_MAX_CPU_ISA=set:${T_ISA})
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
                       PROPERTIES ${props})
  if(T_ALSO_ISA)
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST WORKING_DIRECTORY ${PROJECT_BINARY_DIR} TEST_SUFFIX
                         ".${T_ALSO_ISA}" PROPERTIES ${props} ENVIRONMENT_MODIFICATION
                         ONEDNN_MAX_CPU_ISA=set:${T_ALSO_ISA})
  endif()
endfunction()
