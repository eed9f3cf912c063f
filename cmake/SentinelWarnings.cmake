# The single source of compiler warnings (after Abseil's copts).
set(SENTINEL_COMMON_WARNINGS
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-qual -Wformat=2 -Wundef -Wvla
    -Wmissing-declarations)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND SENTINEL_COMMON_WARNINGS -Wthread-safety -Wshorten-64-to-32)
  # Plugin code runs inside a foreign process: no static constructors or exit-time destructors.
  set(SENTINEL_PLUGIN_WARNINGS -Wglobal-constructors -Wexit-time-destructors)
else()
  set(SENTINEL_PLUGIN_WARNINGS)
endif()
if(SENTINEL_WERROR)
  list(APPEND SENTINEL_COMMON_WARNINGS -Werror)
endif()
# Tests and fakes: gtest macros trip some of the above.
set(SENTINEL_TEST_WARNING_RELAXATIONS -Wno-missing-declarations -Wno-shadow)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND SENTINEL_TEST_WARNING_RELAXATIONS -Wno-shorten-64-to-32 -Wno-gnu-zero-variadic-macro-arguments)
endif()
