// LibTorch's ProcessGroupNCCL for cuda ranks. It lives in libtorch_cuda, so it is compiled only in
// builds with CUDA (HARNESS_HAVE_NCCL); elsewhere cuda ranks would use Gloo, and sim ranks always do.
#include "harness/build_config.h"

#if HARNESS_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <stdexcept>

#include "harness/runtime/dist/counting_backend.h"

namespace harness::runtime {

bool nccl_available() { return HARNESS_HAVE_NCCL != 0; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout) {
#if HARNESS_HAVE_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw std::logic_error("this build has no NCCL (configure with -DHARNESS_WITH_CUDA=ON)");
#endif
}

}  // namespace harness::runtime
