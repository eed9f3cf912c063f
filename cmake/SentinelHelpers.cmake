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
  # Tests that drive the plugin flat out (in-test hosts, torture loops) spend nearly all their time
  # inside it, which the default SENTINEL_BUDGET (0.5 % of wall time) would answer by degrading the
  # plugin mid-test, more so under the sanitizers. Real jobs compute between collectives; the budget
  # itself is tested by plugin_budget_test, which sets its own value.
  if(NOT "${T_ENV}" MATCHES "SENTINEL_BUDGET=")
    list(APPEND T_ENV "SENTINEL_BUDGET=0")
  endif()
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
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

# --- Install layout (cmake --install, and the .deb through cmake/SentinelPackaging.cmake) ---
# One place decides where each kind of file goes, so a new binary or library is one call in the
# CMakeLists.txt that defines it:
#   sentinel_install_programs(sentinel-baseline)              -> <prefix>/bin
#   sentinel_install_nccl_plugin(sentinel_net_plugin)         -> <libdir>, e.g. libnccl-net-sentinel.so
#   sentinel_install_data(FILES a.json DESTINATION schemas)   -> <prefix>/share/sentinel/schemas
# With prefix /usr the library directory is Debian's multiarch one (/usr/lib/x86_64-linux-gnu),
# which the loader searches by default: NCCL_PROFILER_PLUGIN=sentinel (NCCL dlopens
# libnccl-profiler-<name>.so by bare name) then finds the plugin with no LD_LIBRARY_PATH.
include(GNUInstallDirs)
set(SENTINEL_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/sentinel)

function(sentinel_install_programs)
  install(TARGETS ${ARGN} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT sentinel)
endfunction()

# NCCL plugins are dlopen'ed by name, never linked against: no namelink/soname versioning.
function(sentinel_install_nccl_plugin)
  install(TARGETS ${ARGN} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT sentinel)
endfunction()

function(sentinel_install_data)
  cmake_parse_arguments(D "" "DESTINATION" "FILES;DIRECTORY" ${ARGN})
  set(_dest ${SENTINEL_INSTALL_DATADIR})
  if(D_DESTINATION)
    set(_dest ${_dest}/${D_DESTINATION})
  endif()
  if(D_FILES)
    install(FILES ${D_FILES} DESTINATION ${_dest} COMPONENT sentinel)
  endif()
  if(D_DIRECTORY)
    install(DIRECTORY ${D_DIRECTORY} DESTINATION ${_dest} COMPONENT sentinel)
  endif()
endfunction()
