# Installation: headers, libraries, the `mcr` CLI, the data (device catalog, model presets) under
# share/mcr, a CMake package (find_package(mcr CONFIG REQUIRED) -> mcr::comm, mcr::codesign,
# mcr::gemmbench, mcr::plan, mcr::bench) and a pkg-config file. tests/install builds a separate project against it.
include(CMakePackageConfigHelpers)

set(MCR_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mcr)
set(_mcr_export_targets mcr_comm mcr_codesign mcr_gemmbench mcr_plan mcr_warnings)
if(TARGET mcr_bench)
  list(APPEND _mcr_export_targets mcr_bench)
endif()
if(TARGET mcr_nccl_lib)
  list(APPEND _mcr_export_targets mcr_nccl_lib)
endif()
# mcr_warnings and mcr_nccl_lib are exported only because static libraries carry their private
# link dependencies; they add no compile flags to a consumer.
install(TARGETS ${_mcr_export_targets} EXPORT mcrTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS mcr_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mcr DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mcr)
install(EXPORT mcrTargets NAMESPACE mcr:: DESTINATION ${MCR_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mcrConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mcrConfig.cmake
                              INSTALL_DESTINATION ${MCR_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mcrConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mcrConfig.cmake ${PROJECT_BINARY_DIR}/mcrConfigVersion.cmake
        DESTINATION ${MCR_INSTALL_CMAKEDIR})

# pkg-config: every installed library, each before the ones it uses (static linking resolves left
# to right); their own dependencies go to Libs.private (pkg-config --static).
set(MCR_PC_LIBS "-lmcr_plan")
if(TARGET mcr_bench)
  string(APPEND MCR_PC_LIBS " -lmcr_bench")
endif()
string(APPEND MCR_PC_LIBS " -lmcr_gemmbench -lmcr_codesign -lmcr")
set(_pc_libs "-lfmt")
if(MCR_WITH_MPI)
  foreach(_lib IN LISTS MPI_C_LIBRARIES)
    string(APPEND _pc_libs " ${_lib}")
  endforeach()
endif()
if(MCR_WITH_GLOO)
  string(APPEND _pc_libs " -lgloo")
endif()
if(MCR_WITH_NCCL)
  string(APPEND _pc_libs " ${NCCL_LIBRARY}")
endif()
if(MCR_WITH_CUDA)
  string(APPEND _pc_libs " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
if(MCR_WITH_CUBLASLT)
  string(APPEND _pc_libs " -lcublasLt")
endif()
if(MCR_WITH_BLAS)
  foreach(_lib IN LISTS BLAS_LIBRARIES)
    string(APPEND _pc_libs " ${_lib}")
  endforeach()
endif()
foreach(_lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND _pc_libs " -l${_lib}")
endforeach()
set(MCR_PC_LIBS_PRIVATE "${_pc_libs}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/mcr.pc.in ${PROJECT_BINARY_DIR}/mcr.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mcr.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
