# Finds the libraries mcr builds on. Required: fmt, nlohmann-json, CLI11, Threads.
# Optional backends resolve AUTO to ON/OFF here; the result lands in the generated build-config header.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)

function(mcr_resolve_option name found)
  if(${name} STREQUAL "AUTO")
    set(${name} ${found} PARENT_SCOPE)
  elseif(${name} AND NOT ${found})
    message(FATAL_ERROR "${name}=ON but the library was not found")
  endif()
endfunction()

# --- MPI ---------------------------------------------------------------------------------------
if(NOT MCR_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
endif()
set(_mpi_found OFF)
if(MPI_C_FOUND)
  set(_mpi_found ON)
endif()
mcr_resolve_option(MCR_WITH_MPI ${_mpi_found})

# --- Gloo --------------------------------------------------------------------------------------
if(NOT MCR_WITH_GLOO STREQUAL "OFF")
  find_package(Gloo QUIET CONFIG)
endif()
set(_gloo_found OFF)
if(TARGET gloo)
  set(_gloo_found ON)
endif()
mcr_resolve_option(MCR_WITH_GLOO ${_gloo_found})

# --- CUDA, NCCL, cuBLASLt -----------------------------------------------------------------------
# Three switches: the CUDA runtime (device memory, host staging of device tensors), NCCL (a backend)
# and cuBLASLt (the GEMM benchmark's GPU runner). Only host APIs are called, so no CUDA language is
# enabled. NCCL and cuBLASLt need the runtime.
if(NOT MCR_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
endif()
set(_cuda_found OFF)
if(CUDAToolkit_FOUND)
  set(_cuda_found ON)
endif()
mcr_resolve_option(MCR_WITH_CUDA ${_cuda_found})

if(MCR_WITH_CUDA AND NOT MCR_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
endif()
set(_nccl_found OFF)
if(MCR_WITH_CUDA AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(_nccl_found ON)
  add_library(mcr_nccl_lib INTERFACE)
  target_include_directories(mcr_nccl_lib SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(mcr_nccl_lib INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
endif()
mcr_resolve_option(MCR_WITH_NCCL ${_nccl_found})

set(_cublaslt_found OFF)
if(MCR_WITH_CUDA AND TARGET CUDA::cublasLt)
  set(_cublaslt_found ON)
endif()
mcr_resolve_option(MCR_WITH_CUBLASLT ${_cublaslt_found})

# --- BLAS (GEMM benchmark on CPU) ----------------------------------------------------------------
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
set(MCR_WITH_BLAS OFF)
if(BLAS_FOUND AND CBLAS_INCLUDE_DIR)
  set(MCR_WITH_BLAS ON)
endif()

foreach(_opt MCR_WITH_CUDA MCR_WITH_CUBLASLT MCR_WITH_BLAS)
  if(${_opt})
    set(${_opt}_01 1)
  else()
    set(${_opt}_01 0)
  endif()
endforeach()
message(STATUS "mcr: MPI=${MCR_WITH_MPI} Gloo=${MCR_WITH_GLOO} CUDA=${MCR_WITH_CUDA} "
               "NCCL=${MCR_WITH_NCCL} cuBLASLt=${MCR_WITH_CUBLASLT} BLAS=${MCR_WITH_BLAS}")
