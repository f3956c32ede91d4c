# `cmake --install`: the headers, the libraries, the CMake package Lathe (LatheConfig.cmake,
# LatheConfigVersion.cmake, one imported target Lathe::lathe) and lathe.pc for pkg-config.
# Included by CMakeLists.txt when LATHE_INSTALL is on. Inside a wheel (scikit-build-core sets
# SKBUILD) the same files go under the package, <site-packages>/lathe/{include,lib}, where
# `python -m lathe --cmake-dir` finds them.
include(CMakePackageConfigHelpers)

set(lathe_cmake_dir ${LATHE_INSTALL_LIBDIR}/cmake/Lathe)

install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/lathe/ DESTINATION ${LATHE_INSTALL_INCLUDEDIR}/lathe
        FILES_MATCHING PATTERN "*.h")

if(BUILD_SHARED_LIBS)
  set(lathe_exported lathe)
  set(LATHE_CONFIG_STATIC OFF)
else()
  set(lathe_exported lathe lathe_static)
  foreach(layer ${LATHE_LAYERS})
    list(APPEND lathe_exported lathe_${layer})
  endforeach()
  set(LATHE_CONFIG_STATIC ON)
endif()
install(TARGETS ${lathe_exported} EXPORT LatheTargets
        ARCHIVE DESTINATION ${LATHE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${LATHE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${LATHE_INSTALL_BINDIR})
install(EXPORT LatheTargets NAMESPACE Lathe:: DESTINATION ${lathe_cmake_dir})

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/LatheConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/LatheConfig.cmake
                              INSTALL_DESTINATION ${lathe_cmake_dir})
# 0.x: a minor version may change the API, so only the same minor is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/LatheConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/LatheConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/LatheConfigVersion.cmake
        DESTINATION ${lathe_cmake_dir})

# pkg-config: the archives in link order (each before the layers it uses) and the libraries
# they need, or the one shared library. OpenMP's flag is GCC's and Clang's.
if(BUILD_SHARED_LIBS)
  set(LATHE_PC_LIBS " -llathe")
  set(LATHE_PC_PRIVATE "")
else()
  set(LATHE_PC_LIBS "")
  foreach(layer data distributed optim models io lazy trace backend ir nn ops kernels core sym)
    string(APPEND LATHE_PC_LIBS " -llathe_${layer}")
  endforeach()
  set(LATHE_PC_PRIVATE "-ldnnl -lgloo -lpng -ljpeg -lz -fopenmp -lpthread")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/lathe.pc.in ${CMAKE_CURRENT_BINARY_DIR}/lathe.pc
               @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/lathe.pc DESTINATION ${LATHE_INSTALL_LIBDIR}/pkgconfig)

# lathe-run starts the ranks of a data-parallel program (docs/distributed.md).
if(TARGET lathe-run AND NOT SKBUILD)
  install(TARGETS lathe-run RUNTIME DESTINATION ${LATHE_INSTALL_BINDIR})
endif()
