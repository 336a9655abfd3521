# Install rules and the package files: `cmake --install` puts
#   include/fatpack/*.h*                         the public headers (no CUDA, Boost or LZ4 header)
#   lib/libfatpack_runtime.a                     fatpack::runtime (fatpack_core's objects inside)
#   bin/fatpack                                  fatpack::fatpack, the tool fatpack_add_kernels runs
#   lib/cmake/fatpack/fatpackConfig.cmake, fatpackConfigVersion.cmake, fatpackTargets*.cmake,
#                     FatpackKernels.cmake       find_package(fatpack CONFIG) and fatpack_add_kernels()
#   lib/pkgconfig/fatpack.pc                     for builds without CMake
#   share/doc/fatpack/LICENSE, THIRD_PARTY_NOTICES  fatpack's license; the notices of what the runtime carries
# Private dependencies: LZ4, zstd and xxHash. FATPACK_STATIC_DEPS=ON (default): inside
# libfatpack_runtime.a (cmake/FatpackStaticDeps.cmake), so the package files name none of them; OFF: the
# shared libraries, linked into the final program (the runtime is a static library) and found again by
# fatpackConfig.cmake / fatpack.pc. Boost is header-only and build-time only.
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FATPACK_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/fatpack" CACHE STRING
    "Where fatpackConfig.cmake is installed (relative to the prefix)")

install(TARGETS fatpack_runtime EXPORT fatpackTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fatpack EXPORT fatpackTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/fatpack DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT fatpackTargets NAMESPACE fatpack:: DESTINATION ${FATPACK_INSTALL_CMAKEDIR})

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/THIRD_PARTY_NOTICES DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(FATPACK_CONFIG_STATIC_DEPS ${FATPACK_STATIC_DEPS})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/templates/fatpackConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fatpackConfig.cmake INSTALL_DESTINATION ${FATPACK_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fatpackConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fatpackConfig.cmake ${PROJECT_BINARY_DIR}/fatpackConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FatpackKernels.cmake
        DESTINATION ${FATPACK_INSTALL_CMAKEDIR})

# The .pc finds its prefix from its own location, so an install tree can be moved.
file(RELATIVE_PATH FATPACK_PC_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" FATPACK_PC_PREFIX "${FATPACK_PC_PREFIX}")
set(FATPACK_PC_DL "")
foreach(_lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND FATPACK_PC_DL " -l${_lib}")
endforeach()
# FATPACK_STATIC_DEPS=ON: LZ4, zstd and xxHash are inside libfatpack_runtime.a, nothing to require.
if(FATPACK_STATIC_DEPS)
  set(FATPACK_PC_REQUIRES "")
else()
  set(FATPACK_PC_REQUIRES "Requires.private: liblz4 libzstd libxxhash")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/templates/fatpack.pc.in ${PROJECT_BINARY_DIR}/fatpack.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fatpack.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
