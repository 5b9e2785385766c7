# Imported targets for the parts of LibTorch the harness links, from a LibTorch prefix (a libtorch
# zip, the `torch` folder of a wheel, or the machine-wide cache that scripts/setup.sh fills):
#   LibTorch::cpu   c10 + torch_cpu (+ torch), the CPU build every configuration needs
#   LibTorch::cuda  c10_cuda + torch_cuda, only when HARNESS_WITH_CUDA is ON
# We do not use TorchConfig.cmake: the wheel's config insists on CUDA, cuDNN and friends even
# when only the CPU libraries are wanted, which a GPU-less CI machine does not have.
include_guard(GLOBAL)

set(LIBTORCH_ROOT "${LIBTORCH_ROOT}" CACHE PATH "LibTorch prefix (holds include/ and lib/)")
if(NOT LIBTORCH_ROOT OR NOT EXISTS "${LIBTORCH_ROOT}/include/ATen/ATen.h")
  message(FATAL_ERROR
    "LibTorch not found at LIBTORCH_ROOT='${LIBTORCH_ROOT}'.\n"
    "Run scripts/setup.sh (it fetches LibTorch 2.11.0 into /var/cache/harness), or pass "
    "-DLIBTORCH_ROOT=<prefix with include/ and lib/>, e.g. the output of "
    "python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))'.")
endif()

function(_harness_torch_lib target name)
  find_library(_lib_${name} NAMES ${name} PATHS "${LIBTORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
  add_library(${target} SHARED IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${_lib_${name}}")
endfunction()

_harness_torch_lib(LibTorch::c10 c10)
_harness_torch_lib(LibTorch::torch_cpu torch_cpu)
add_library(LibTorch::cpu INTERFACE IMPORTED GLOBAL)
target_include_directories(LibTorch::cpu SYSTEM INTERFACE
  "${LIBTORCH_ROOT}/include" "${LIBTORCH_ROOT}/include/torch/csrc/api/include")
target_link_libraries(LibTorch::cpu INTERFACE LibTorch::torch_cpu LibTorch::c10)
target_compile_definitions(LibTorch::cpu INTERFACE _GLIBCXX_USE_CXX11_ABI=1)


# LibTorch::cuda: c10_cuda + torch_cuda + the CUDA runtime (needs find_package(CUDAToolkit)).
# --no-as-needed: nothing references torch_cuda directly, but loading it registers CUDA with ATen
# (at::hasCUDA()).
function(harness_add_libtorch_cuda)
  if(TARGET LibTorch::cuda)
    return()
  endif()
  _harness_torch_lib(LibTorch::c10_cuda c10_cuda)
  _harness_torch_lib(LibTorch::torch_cuda torch_cuda)
  add_library(LibTorch::cuda INTERFACE IMPORTED GLOBAL)
  target_link_libraries(LibTorch::cuda INTERFACE "-Wl,--no-as-needed" LibTorch::torch_cuda
                        LibTorch::c10_cuda CUDA::cudart)
endfunction()

message(STATUS "LibTorch at ${LIBTORCH_ROOT}")
