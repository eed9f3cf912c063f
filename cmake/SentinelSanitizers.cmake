# SENTINEL_SANITIZE applies one sanitizer set to every target (test binaries, fakes and the .so
# alike, as the Abseil FAQ asks). A sanitized .so is for tests only and never shipped.
if(SENTINEL_SANITIZE)
  set(_san_flags -fsanitize=${SENTINEL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san_flags})
  add_link_options(-fsanitize=${SENTINEL_SANITIZE})
  # clang's UBSan also checks the type of every call through a function pointer (-fsanitize=
  # function, part of `undefined`). Our C ABI declarations (NCCL's, CUPTI's, libibverbs') are
  # written here from the facts, never taken from their headers, so a call through dlsym into the
  # fake NCCL (C++, instrumented) is to a structurally identical but differently named type, and
  # is reported (sentinel-baseline calling the fake's ncclGetUniqueId). gcc has no such check.
  if(SENTINEL_SANITIZE MATCHES "undefined" AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    add_compile_options(-fno-sanitize=function)
  endif()
endif()

# Fuzz builds: every library gets libFuzzer's coverage instrumentation (not its main), so the
# fuzzers are guided by the code under test, not only by their own small entry file.
if(SENTINEL_BUILD_FUZZERS AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# SENTINEL_DCHECK (common/dcheck.h) aborts in Debug and sanitizer builds, where a test should stop
# at the broken invariant; in release builds it is compiled out (its condition not evaluated), so it
# may guard the hot path. Invariants a release build must act on are checked in every build.
if(SENTINEL_SANITIZE)
  add_compile_definitions(SENTINEL_DCHECK_FATAL=1)
else()
  add_compile_definitions($<$<CONFIG:Debug>:SENTINEL_DCHECK_FATAL=1>)
endif()
