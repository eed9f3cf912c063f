# sentinel_cc_test(NAME SRCS ... DEPS ... [LABELS ...] [ENV ...] [TIMEOUT s]): one gtest binary,
# registered with ctest under its own name.
function(sentinel_cc_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SRCS;DEPS;LABELS;ENV" ${ARGN})
  add_executable(${name} ${T_SRCS})
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main GTest::gmock
                                        Threads::Threads)
  target_compile_options(${name} PRIVATE ${SENTINEL_COMMON_WARNINGS}
                                         ${SENTINEL_TEST_WARNING_RELAXATIONS})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

# sentinel_add_area_subdirs(): adds every sub-folder of the current folder that has a
# CMakeLists.txt (one area's tests each: plugin/, collector/, guard/, transport/...). The
# collector's folders need sentineld, so they are skipped when the collector is not built.
macro(sentinel_add_area_subdirs)
  file(GLOB _sentinel_area_dirs LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/*)
  foreach(_dir ${_sentinel_area_dirs})
    get_filename_component(_name ${_dir} NAME)
    if(_name STREQUAL "collector" AND NOT SENTINEL_BUILD_COLLECTOR)
      continue()
    endif()
    if(IS_DIRECTORY ${_dir} AND EXISTS ${_dir}/CMakeLists.txt)
      add_subdirectory(${_dir})
    endif()
  endforeach()
endmacro()
