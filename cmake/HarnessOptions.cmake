# Optional backends, validated in one place. Each is AUTO (use it when found), ON (required: a
# fix-it error when missing) or OFF.
include_guard(GLOBAL)

set(_harness_tristate AUTO ON OFF)
foreach(opt CUDA CUPTI NVTX)
  set(HARNESS_WITH_${opt} AUTO CACHE STRING "Build with ${opt}: AUTO, ON or OFF")
  set_property(CACHE HARNESS_WITH_${opt} PROPERTY STRINGS ${_harness_tristate})
  if(NOT HARNESS_WITH_${opt} IN_LIST _harness_tristate)
    message(FATAL_ERROR "HARNESS_WITH_${opt} must be AUTO, ON or OFF, not '${HARNESS_WITH_${opt}}'")
  endif()
endforeach()

find_package(CUDAToolkit QUIET)

# NVTX: header-only (nvtx3), from the CUDA toolkit.
set(HARNESS_HAVE_NVTX OFF)
if(NOT HARNESS_WITH_NVTX STREQUAL "OFF")
  find_path(HARNESS_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(HARNESS_NVTX_INCLUDE_DIR)
    set(HARNESS_HAVE_NVTX ON)
  elseif(HARNESS_WITH_NVTX STREQUAL "ON")
    message(FATAL_ERROR "HARNESS_WITH_NVTX=ON but nvtx3/nvToolsExt.h was not found. Install the "
                        "CUDA toolkit (or NVIDIA/NVTX headers) or configure with -DHARNESS_WITH_NVTX=OFF.")
  endif()
endif()

# CUPTI: the instrument of --device cuda. Its record aggregation is unit-tested with synthetic
# records wherever the headers and library are found, GPU or not.
set(HARNESS_HAVE_CUPTI OFF)
if(NOT HARNESS_WITH_CUPTI STREQUAL "OFF")
  if(TARGET CUDA::cupti)
    set(HARNESS_HAVE_CUPTI ON)
  elseif(HARNESS_WITH_CUPTI STREQUAL "ON")
    message(FATAL_ERROR "HARNESS_WITH_CUPTI=ON but CUPTI was not found. Install the CUDA toolkit "
                        "with CUPTI or configure with -DHARNESS_WITH_CUPTI=OFF.")
  endif()
endif()

# CUDA device support (LibTorch's CUDA libraries) is opt-in: a CPU-only machine has the toolkit
# but the wheel's CUDA libraries also need cuDNN and friends, and the GPU machine brings its own.
set(HARNESS_HAVE_CUDA OFF)
if(HARNESS_WITH_CUDA STREQUAL "ON")
  if(NOT CUDAToolkit_FOUND OR NOT EXISTS "${LIBTORCH_ROOT}/lib/libtorch_cuda.so")
    message(FATAL_ERROR "HARNESS_WITH_CUDA=ON needs the CUDA toolkit and a LibTorch with "
                        "lib/libtorch_cuda.so (LIBTORCH_ROOT=${LIBTORCH_ROOT}).")
  endif()
  set(HARNESS_HAVE_CUDA ON)
elseif(HARNESS_WITH_CUDA STREQUAL "AUTO" AND CUDAToolkit_FOUND AND
       EXISTS "${LIBTORCH_ROOT}/lib/libtorch_cuda.so")
  set(HARNESS_HAVE_CUDA ON)
endif()
if(HARNESS_HAVE_CUDA)
  harness_add_libtorch_cuda()
endif()

message(STATUS "harness: NVTX=${HARNESS_HAVE_NVTX} CUPTI=${HARNESS_HAVE_CUPTI} CUDA=${HARNESS_HAVE_CUDA}")

# Sanitizers for our own code (scripts/sanitize.sh): a comma-separated list for -fsanitize=, e.g.
# "address,undefined". LibTorch is not instrumented; its calls go through the sanitizer runtime.
set(HARNESS_SANITIZERS "" CACHE STRING "Build with -fsanitize=<this> (e.g. address,undefined)")
if(HARNESS_SANITIZERS)
  if(NOT HARNESS_SANITIZERS MATCHES "^[a-z,]+$")
    message(FATAL_ERROR "HARNESS_SANITIZERS must be a comma-separated list such as "
                        "address,undefined, not '${HARNESS_SANITIZERS}'")
  endif()
  # UBSan: every finding is fatal so that ctest sees it.
  add_compile_options(-fsanitize=${HARNESS_SANITIZERS} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${HARNESS_SANITIZERS})
  message(STATUS "harness: sanitizers ${HARNESS_SANITIZERS}")
endif()

# libFuzzer binaries (fuzz/, scripts/fuzz.sh): clang only. Every translation unit gets coverage
# instrumentation so that the fuzzer sees into the parsers it calls.
option(HARNESS_FUZZ "Build the libFuzzer binaries (needs clang; see scripts/fuzz.sh)" OFF)
if(HARNESS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "HARNESS_FUZZ=ON needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14, as scripts/fuzz.sh does")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
