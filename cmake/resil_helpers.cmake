# Helpers shared by every CMakeLists in the tree, so that a new test,
# benchmark or adapter is one call, not a copied block.

# resil_pkgconfig(LIB NAME DESCRIPTION REQUIRES LIBS_PRIVATE): write and
# install LIB.pc. REQUIRES are public (Requires:): a program using an adapter
# calls the core and the adapter's dependency (curl_easy_setopt, say)
# directly, so `pkg-config --libs resil-http` must name -lresil and -lcurl. The prefix it names must be the one the install really uses,
# and `cmake --install --prefix DIR` may differ from the configured
# CMAKE_INSTALL_PREFIX, so the file is finished at install time: every field
# but the prefix is filled in now, the prefix then. (DESTDIR staging keeps the
# configured prefix, as it should.)
function(resil_pkgconfig lib name description requires libs_private)
  set(PC_LIB ${lib})
  set(PC_NAME ${name})
  set(PC_DESCRIPTION ${description})
  set(PC_REQUIRES ${requires})
  set(PC_LIBS_PRIVATE ${libs_private})
  set(PC_PREFIX "@PC_PREFIX@")
  foreach(kind LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
      set(PC_${kind} "${CMAKE_INSTALL_${kind}}")
    else()
      set(PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
    endif()
  endforeach()
  set(staged ${PROJECT_BINARY_DIR}/pkgconfig/${lib}.pc.in)
  set(final ${PROJECT_BINARY_DIR}/pkgconfig/${lib}.pc)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/resil.pc.in ${staged} @ONLY)
  install(CODE "set(PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
configure_file(\"${staged}\" \"${final}\" @ONLY)")
  install(FILES ${final} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

# resil_add_tests(DIR PREFIX LIBS...): every DIR/test_*.c becomes an
# executable linked with the test support library, cmocka and LIBS, and a
# CTest test named PREFIX.<name>.
function(resil_add_tests dir prefix)
  if(NOT RESIL_BUILD_TESTS)
    return()
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/test_*.c)
  foreach(src ${sources})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^test_" "" short ${name})
    set(target ${prefix}_${name})
    add_executable(${target} ${src})
    target_link_libraries(${target} PRIVATE resil_test_support ${ARGN})
    add_test(NAME ${prefix}.${short} COMMAND ${target})
    set_tests_properties(${prefix}.${short} PROPERTIES TIMEOUT 300
      ENVIRONMENT "RESIL_BUILD_DIR=${PROJECT_BINARY_DIR};RESIL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  endforeach()
endfunction()

# resil_add_benches(DIR LIBS...): every DIR/bench_*.c becomes a benchmark
# executable run by the `bench` target.
function(resil_add_benches dir)
  if(NOT RESIL_BUILD_BENCH)
    return()
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/bench_*.c)
  foreach(src ${sources})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE resil_bench_support ${ARGN})
    set_property(GLOBAL APPEND PROPERTY RESIL_BENCHES ${name})
  endforeach()
endfunction()

# resil_add_fuzzers(DIR LIBS...): every DIR/fuzz_*.c defines
# LLVMFuzzerTestOneInput. It always becomes a replay test (corpus files plus
# generated mutations, tests/fuzz/replay.c) so make check exercises it; with
# RESIL_FUZZ=ON under clang it also becomes a real libFuzzer binary.
function(resil_add_fuzzers dir)
  if(NOT RESIL_BUILD_TESTS)
    return()
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/fuzz_*.c)
  foreach(src ${sources})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" short ${name})
    add_executable(replay_${name} ${src} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay.c)
    target_link_libraries(replay_${name} PRIVATE ${ARGN})
    add_test(NAME fuzz.${short} COMMAND replay_${name} ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${short})
    set_tests_properties(fuzz.${short} PROPERTIES TIMEOUT 300)
    if(RESIL_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
      add_executable(${name} ${src})
      target_link_options(${name} PRIVATE -fsanitize=fuzzer)
      target_link_libraries(${name} PRIVATE ${ARGN})
    endif()
  endforeach()
endfunction()

# resil_add_adapter(TARGET PKG name ABI n DESCRIPTION text REQUIRES "pc modules"
#                   [SOURCES extra.c...] DEPS targets...): build every .c of
# the calling folder (plus SOURCES) once as objects, packaged as the shared
# library lib<name> (SONAME lib<name>.so.<n>, the library's own ABI number) and the static TARGET_static, both
# linked to the core and DEPS, installed with <name>.pc. Every adapter is
# shaped alike, so the shape lives here once.
function(resil_add_adapter target)
  cmake_parse_arguments(A "" "PKG;ABI;DESCRIPTION;REQUIRES" "SOURCES;DEPS" ${ARGN})
  if(NOT DEFINED A_ABI OR A_ABI STREQUAL "")
    message(FATAL_ERROR "resil_add_adapter(${target}): ABI (the library's ABI number) is required")
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.c)
  add_library(${target}_objects OBJECT ${sources} ${A_SOURCES})
  target_include_directories(${target}_objects PRIVATE ${PROJECT_SOURCE_DIR}/include
    ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(${target}_objects PRIVATE RESIL_BUILDING)
  target_link_libraries(${target}_objects PRIVATE ${A_DEPS} Threads::Threads)

  add_library(${target} SHARED $<TARGET_OBJECTS:${target}_objects>)
  add_library(${target}_static STATIC $<TARGET_OBJECTS:${target}_objects>)
  target_link_libraries(${target} PUBLIC resil_shared ${A_DEPS} Threads::Threads)
  target_link_libraries(${target}_static PUBLIC resil_static ${A_DEPS} Threads::Threads)
  foreach(t ${target} ${target}_static)
    target_include_directories(${t} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endforeach()
  # Exported as resil::<short> and resil::<short>_static (resil::http,
  # resil::http_static), the names the README gives; aliases of the same
  # names serve a project that adds this tree with add_subdirectory.
  string(REGEX REPLACE "^resil_" "" short ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${A_PKG}
    VERSION ${PROJECT_VERSION} SOVERSION ${A_ABI} EXPORT_NAME ${short})
  set_target_properties(${target}_static PROPERTIES OUTPUT_NAME ${A_PKG}
    EXPORT_NAME ${short}_static)
  # Installed anywhere, the adapter finds libresil.so.N beside it: a
  # program's own RUNPATH does not serve its libraries' dependencies.
  if(RESIL_INSTALL_RPATH)
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
  add_library(resil::${short} ALIAS ${target})
  add_library(resil::${short}_static ALIAS ${target}_static)
  install(TARGETS ${target} ${target}_static EXPORT resil-${short}Targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT resil-${short}Targets NAMESPACE resil::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/resil)
  resil_export_deps(${short} ${A_DEPS})
  resil_pkgconfig(${A_PKG} ${A_PKG} "${A_DESCRIPTION}" "${A_REQUIRES}" "")
endfunction()

# resil_export_deps(SHORT DEPS...): remember the adapter and, for each
# PkgConfig::PREFIX it links, "PREFIX|module" (the module as
# resil_adapter_needs looked it up), so resilConfig.cmake can find the same
# modules for the consumer before including the adapter's targets.
function(resil_export_deps short)
  set(deps "")
  foreach(dep ${ARGN})
    if(dep MATCHES "^PkgConfig::(.+)$")
      get_property(module GLOBAL PROPERTY RESIL_PKG_MODULE_${CMAKE_MATCH_1})
      list(APPEND deps "${CMAKE_MATCH_1}|${module}")
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY RESIL_EXPORTED_ADAPTERS ${short})
  set_property(GLOBAL PROPERTY RESIL_EXPORTED_DEPS_${short} "${deps}")
endfunction()

# Optional adapters. Each adapter's CMakeLists starts with
#   resil_adapter_begin(RESIL_WITH_X libresil-x)
#   resil_adapter_needs(PREFIX "pkg-config module" debian-package) ...
#   if(NOT RESIL_ADAPTER_ON) return() endif()
# An adapter is built when its switch (RESIL_WITH_X, ON by default) is on and
# every module it needs is found; otherwise configure says, in one line, what
# is off and the first reason ("-- resil: libresil-store off: sqlite3 not
# found (Debian: libsqlite3-dev)"), and the rest of the tree goes on without
# it. A found module is an IMPORTED GLOBAL target PkgConfig::PREFIX, so the
# tool in cli/ can link what an adapter found.
macro(resil_adapter_begin switch what)
  set(RESIL_ADAPTER_NAME "${what}")
  set(RESIL_ADAPTER_ON ON)
  set(RESIL_ADAPTER_WHY "")
  if(NOT ${switch})
    set(RESIL_ADAPTER_ON OFF)
    set(RESIL_ADAPTER_WHY "${switch}=OFF")
  endif()
endmacro()

macro(resil_adapter_needs prefix module debian)
  if(RESIL_ADAPTER_ON)
    if(NOT PKG_CONFIG_FOUND)
      set(RESIL_ADAPTER_ON OFF)
      set(RESIL_ADAPTER_WHY "pkg-config not found (Debian: pkg-config), so ${module} cannot be looked up")
    else()
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
      set_property(GLOBAL PROPERTY RESIL_PKG_MODULE_${prefix} "${module}")
      if(NOT ${prefix}_FOUND)
        set(RESIL_ADAPTER_ON OFF)
        set(RESIL_ADAPTER_WHY "${module} not found (Debian: ${debian})")
      endif()
    endif()
  endif()
endmacro()

# resil_adapter_end(): say what is off and why, once. Returns nothing; the
# caller tests RESIL_ADAPTER_ON.
macro(resil_adapter_end)
  if(RESIL_ADAPTER_ON)
    message(STATUS "resil: ${RESIL_ADAPTER_NAME} on")
  else()
    message(STATUS "resil: ${RESIL_ADAPTER_NAME} off: ${RESIL_ADAPTER_WHY}")
  endif()
endmacro()
