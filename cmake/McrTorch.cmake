# PyTorch integration (src/torch, python/mcr): MCR_WITH_TORCH = AUTO/ON/OFF.
#
# torch 2.x from PyPI, found through the interpreter that has it: MCR_TORCH_PYTHON (cache or
# environment), else the project's virtual environment (.venv, made by scripts/setup-deps). torch's
# own CMake package is not used: it configures CUDA, cuDNN and more that the extension does not
# need. The extension compiles against the wheel's headers, with the pybind11 the wheel bundles
# (a pybind11 of another major version cannot see torch's classes), the C++11 ABI the wheel uses,
# and links libtorch_python explicitly (docs/torch.md, "Build").
# The environment variable, where set, wins over an earlier configure's value (scripts/setup-deps
# checked that interpreter, and scripts/test then builds the same tree against it); a value taken
# from it goes back to the default once it is unset. A value given with -D stays.
set(_torch_python_doc "Python interpreter with torch 2.x (mcr.torch)")
set(_venv_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
if(DEFINED ENV{MCR_TORCH_PYTHON} AND NOT "$ENV{MCR_TORCH_PYTHON}" STREQUAL "")
  set(MCR_TORCH_PYTHON "$ENV{MCR_TORCH_PYTHON}" CACHE FILEPATH "${_torch_python_doc}" FORCE)
  set(MCR_TORCH_PYTHON_FROM_ENV "$ENV{MCR_TORCH_PYTHON}" CACHE INTERNAL "the environment's value")
elseif(NOT "${MCR_TORCH_PYTHON_FROM_ENV}" STREQUAL "" AND
       MCR_TORCH_PYTHON STREQUAL MCR_TORCH_PYTHON_FROM_ENV)
  set(MCR_TORCH_PYTHON "${_venv_python}" CACHE FILEPATH "${_torch_python_doc}" FORCE)
  set(MCR_TORCH_PYTHON_FROM_ENV "" CACHE INTERNAL "the environment's value")
else()
  set(MCR_TORCH_PYTHON "${_venv_python}" CACHE FILEPATH "${_torch_python_doc}")
endif()

set(_torch_found OFF)
set(_torch_why "no interpreter at MCR_TORCH_PYTHON=${MCR_TORCH_PYTHON} (scripts/setup-deps makes .venv)")
if(NOT MCR_WITH_TORCH STREQUAL "OFF" AND EXISTS ${MCR_TORCH_PYTHON})
  execute_process(
    COMMAND ${MCR_TORCH_PYTHON} -c [=[
import os, sysconfig, torch
d = os.path.dirname(torch.__file__)
print(torch.__version__, int(torch._C._GLIBCXX_USE_CXX11_ABI), os.path.join(d, "include"),
      os.path.join(d, "lib"), sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX"),
      int(torch.backends.cuda.is_built()), sep=";")
]=]
    RESULT_VARIABLE _torch_rc OUTPUT_VARIABLE _torch_out ERROR_VARIABLE _torch_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _torch_rc EQUAL 0)
    set(_torch_why "${MCR_TORCH_PYTHON} cannot import torch: ${_torch_err}")
  else()
    list(GET _torch_out 0 MCR_TORCH_VERSION)
    list(GET _torch_out 1 _torch_cxx11_abi)
    list(GET _torch_out 2 MCR_TORCH_INCLUDE_DIR)
    list(GET _torch_out 3 MCR_TORCH_LIB_DIR)
    list(GET _torch_out 4 MCR_TORCH_PYTHON_INCLUDE_DIR)
    list(GET _torch_out 5 MCR_TORCH_EXT_SUFFIX)
    list(GET _torch_out 6 MCR_TORCH_CUDA_BUILT)
    # The oldest release the binding is built and tested against. It overrides c10d::Backend
    # members (split, getBackendOptions) and reads the ops' option structs, which change from
    # release to release, and needs the pybind11 3 bundled from 2.9 on: an untested older torch
    # is said to be too old here rather than left to fail in the compiler.
    if(MCR_TORCH_VERSION VERSION_LESS 2.11)
      set(_torch_why "torch ${MCR_TORCH_VERSION} at ${MCR_TORCH_PYTHON} is older than 2.11, the oldest release the binding is built and tested against (it overrides c10d::Backend members that change between releases); scripts/setup-deps installs the pinned torch in .venv")
    elseif(NOT _torch_cxx11_abi)
      set(_torch_why "torch ${MCR_TORCH_VERSION} was built with _GLIBCXX_USE_CXX11_ABI=0; mcr needs a C++11-ABI build (every x86-64 wheel from 2.7 on)")
    elseif(NOT EXISTS ${MCR_TORCH_INCLUDE_DIR}/torch/csrc/distributed/c10d/Backend.hpp)
      set(_torch_why "torch at ${MCR_TORCH_PYTHON} ships no c10d headers (torch/csrc/distributed/c10d/Backend.hpp)")
    elseif(NOT EXISTS ${MCR_TORCH_INCLUDE_DIR}/pybind11/pybind11.h)
      set(_torch_why "torch at ${MCR_TORCH_PYTHON} ships no pybind11 headers")
    elseif(NOT EXISTS ${MCR_TORCH_PYTHON_INCLUDE_DIR}/Python.h)
      set(_torch_why "no Python.h in ${MCR_TORCH_PYTHON_INCLUDE_DIR} (Debian: python3-dev)")
    else()
      set(_torch_found ON)
    endif()
  endif()
endif()
if(MCR_WITH_TORCH AND NOT MCR_WITH_TORCH STREQUAL "AUTO" AND NOT _torch_found)
  message(FATAL_ERROR "MCR_WITH_TORCH=ON: ${_torch_why}")
endif()
mcr_resolve_option(MCR_WITH_TORCH ${_torch_found})

if(MCR_WITH_TORCH)
  set(MCR_PYTHON_DIR ${PROJECT_BINARY_DIR}/python)
  # The wheel's libraries, as one imported target; the system include keeps -Werror to our code.
  add_library(mcr_torch_wheel INTERFACE IMPORTED)
  set(_torch_libs c10 torch_cpu torch torch_python)
  if(MCR_TORCH_CUDA_BUILT AND MCR_WITH_CUDA)
    list(APPEND _torch_libs c10_cuda torch_cuda)
  endif()
  set(_torch_paths)
  foreach(_l IN LISTS _torch_libs)
    list(APPEND _torch_paths ${MCR_TORCH_LIB_DIR}/lib${_l}.so)
  endforeach()
  target_include_directories(mcr_torch_wheel SYSTEM INTERFACE
    ${MCR_TORCH_INCLUDE_DIR} ${MCR_TORCH_INCLUDE_DIR}/torch/csrc/api/include
    ${MCR_TORCH_PYTHON_INCLUDE_DIR})
  target_compile_definitions(mcr_torch_wheel INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  target_link_libraries(mcr_torch_wheel INTERFACE ${_torch_paths})
  message(STATUS "mcr.torch: torch ${MCR_TORCH_VERSION} via ${MCR_TORCH_PYTHON}, package in ${MCR_PYTHON_DIR}")
else()
  message(STATUS "mcr.torch: off (${_torch_why})")
endif()
