# PyTorch integration (src/torch, python/mcr): MCR_WITH_TORCH = AUTO/ON/OFF.
# torch is found through the interpreter that has it (Debian's own python3, which may not be the
# first python3 on PATH): it must import torch, and libtorch-dev and pybind11 must be installed.
set(MCR_TORCH_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python interpreter with torch (mcr.torch)")
set(_torch_found OFF)
if(NOT MCR_WITH_TORCH STREQUAL "OFF" AND EXISTS ${MCR_TORCH_PYTHON})
  # pybind11's internals id must match torch's or torch types are not recognised across modules.
  execute_process(
    COMMAND ${MCR_TORCH_PYTHON} -c
            "import torch; c=torch._C; print(c._PYBIND11_COMPILER_TYPE, c._PYBIND11_STDLIB, c._PYBIND11_BUILD_ABI, torch.__version__, sep=';')"
    RESULT_VARIABLE _torch_rc OUTPUT_VARIABLE _torch_out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_torch_rc EQUAL 0)
    list(GET _torch_out 0 MCR_TORCH_PYBIND11_COMPILER_TYPE)
    list(GET _torch_out 1 MCR_TORCH_PYBIND11_STDLIB)
    list(GET _torch_out 2 MCR_TORCH_PYBIND11_BUILD_ABI)
    list(GET _torch_out 3 MCR_TORCH_VERSION)
    find_package(Torch QUIET)
    set(PYTHON_EXECUTABLE ${MCR_TORCH_PYTHON})
    find_package(pybind11 CONFIG QUIET)
    if(TORCH_FOUND)
      find_library(MCR_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
    endif()
    if(TORCH_FOUND AND pybind11_FOUND AND MCR_TORCH_PYTHON_LIBRARY)
      set(_torch_found ON)
    endif()
  endif()
endif()
mcr_resolve_option(MCR_WITH_TORCH ${_torch_found})
if(MCR_WITH_TORCH)
  set(MCR_WITH_TORCH_01 1)
  set(MCR_PYTHON_DIR ${PROJECT_BINARY_DIR}/python)
  message(STATUS "mcr.torch: torch ${MCR_TORCH_VERSION} via ${MCR_TORCH_PYTHON}, package in ${MCR_PYTHON_DIR}")
else()
  set(MCR_WITH_TORCH_01 0)
  message(STATUS "mcr.torch: off")
endif()
