# How LZ4, zstd and xxHash get into products (docs/cmake.md "Dependencies of the runtime").
#
# FATPACK_STATIC_DEPS=ON (the default): their static archives (Debian's -dev packages ship liblz4.a,
# libzstd.a, libxxhash.a) are folded into libfatpack_runtime.a: every member of each archive, copied
# with its global symbols made hidden (cmake/FatpackFoldDeps.cmake). A product then needs none of their
# shared libraries at run time, links only the members the runtime uses (an archive's members are
# pulled one by one: zstd's decoder, never its encoder), and exports none of their symbols, even from a
# shared library linked without --exclude-libs. The installed package config and fatpack.pc then name
# no dependency but threads and libdl.
# FATPACK_STATIC_DEPS=OFF: the runtime links the shared libraries pkg-config finds (as before), and
# fatpackConfig.cmake / fatpack.pc find them again for the consumer.
#
# Either way the target fatpack_deps carries them for fatpack's own targets (core, the CLI, tests):
# ON: a static library of the same hidden members (never installed); OFF: the pkg-config targets.
# FATPACK_DEP_OBJECTS lists the hidden members (ON), for fatpack_runtime's sources.
include_guard(GLOBAL)
option(FATPACK_STATIC_DEPS "Fold LZ4, zstd and xxHash (their static archives, symbols hidden) into fatpack::runtime" ON)

set(FATPACK_DEP_OBJECTS "")
if(NOT FATPACK_STATIC_DEPS)
  add_library(fatpack_deps INTERFACE)
  target_link_libraries(fatpack_deps INTERFACE PkgConfig::FATPACK_LZ4 PkgConfig::FATPACK_ZSTD PkgConfig::FATPACK_XXHASH)
  return()
endif()

if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  message(FATAL_ERROR "FATPACK_STATIC_DEPS=ON folds ELF archives (Linux only): set -DFATPACK_STATIC_DEPS=OFF")
endif()
set(_fatpack_fold_archives "")
set(_fatpack_dep_archives "")
set(_fatpack_dep_includes "")
foreach(_dep lz4:LZ4 zstd:ZSTD xxhash:XXHASH)
  string(REPLACE ":" ";" _dep "${_dep}")
  list(GET _dep 0 _name)
  list(GET _dep 1 _prefix)
  find_library(FATPACK_${_prefix}_ARCHIVE NAMES lib${_name}.a
    HINTS ${FATPACK_${_prefix}_LIBRARY_DIRS} ${FATPACK_${_prefix}_STATIC_LIBRARY_DIRS}
    DOC "lib${_name}.a, folded into fatpack::runtime (FATPACK_STATIC_DEPS)")
  if(NOT FATPACK_${_prefix}_ARCHIVE)
    message(FATAL_ERROR "FATPACK_STATIC_DEPS=ON needs the static archive lib${_name}.a (Debian/Ubuntu: the "
                        "lib${_name}-dev package ships it; or set FATPACK_${_prefix}_ARCHIVE=/path/lib${_name}.a), "
                        "or -DFATPACK_STATIC_DEPS=OFF to link the shared library")
  endif()
  execute_process(COMMAND ${CMAKE_AR} t ${FATPACK_${_prefix}_ARCHIVE} OUTPUT_VARIABLE _members RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${CMAKE_AR} t ${FATPACK_${_prefix}_ARCHIVE} failed (${_rc})")
  endif()
  string(REGEX REPLACE "\n$" "" _members "${_members}")
  string(REPLACE "\n" ";" _members "${_members}")
  foreach(_m IN LISTS _members)
    list(APPEND FATPACK_DEP_OBJECTS ${PROJECT_BINARY_DIR}/fatpack_deps/${_name}-${_m})
  endforeach()
  list(APPEND _fatpack_fold_archives "${_name}=${FATPACK_${_prefix}_ARCHIVE}")
  list(APPEND _fatpack_dep_archives ${FATPACK_${_prefix}_ARCHIVE})
  list(APPEND _fatpack_dep_includes $<TARGET_PROPERTY:PkgConfig::FATPACK_${_prefix},INTERFACE_INCLUDE_DIRECTORIES>)
endforeach()
# The member lists are read here: a new archive (a package upgrade) must configure again.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_fatpack_dep_archives})
string(REPLACE ";" "|" _fatpack_fold_archives "${_fatpack_fold_archives}")
add_custom_command(OUTPUT ${FATPACK_DEP_OBJECTS}
  COMMAND ${CMAKE_COMMAND} -DAR=${CMAKE_AR} -DNM=${CMAKE_NM} -DLINKER=${CMAKE_LINKER} -DCC=${CMAKE_C_COMPILER}
          -DOUT_DIR=${PROJECT_BINARY_DIR}/fatpack_deps "-DARCHIVES=${_fatpack_fold_archives}"
          -P ${CMAKE_CURRENT_LIST_DIR}/FatpackFoldDeps.cmake
  DEPENDS ${_fatpack_dep_archives} ${CMAKE_CURRENT_LIST_DIR}/FatpackFoldDeps.cmake
  COMMENT "Folding LZ4, zstd and xxHash into hidden objects (FATPACK_STATIC_DEPS)" VERBATIM)
add_library(fatpack_deps STATIC ${FATPACK_DEP_OBJECTS})
set_target_properties(fatpack_deps PROPERTIES LINKER_LANGUAGE C)
target_include_directories(fatpack_deps SYSTEM INTERFACE ${_fatpack_dep_includes})
target_link_libraries(fatpack_deps INTERFACE Threads::Threads)  # libzstd.a's thread pool
unset(_fatpack_fold_archives)
unset(_fatpack_dep_archives)
unset(_fatpack_dep_includes)
