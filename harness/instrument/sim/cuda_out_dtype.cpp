// CUDA kernels whose output dtype is not their input's, which CPU's kernels refuse or lack; the
// host computes them in float, one launch each, as on CUDA:
// - softmax: `_softmax` and `_log_softmax` take `half_to_float` (a half input, a float output:
//   what torch's composite `softmax(x, dtype=torch.float)` and `log_softmax(x, dtype=...)` call
//   for a half CUDA tensor, SoftMax.cpp, as autocast's fp32 policy does), and their backward a
//   float gradient for a half input ("softmax with half to float conversion is not supported on
//   CPU"). Without the conversion they run as CPU's;
// - matrix products with `out_dtype` (`mm`, `bmm`, `addmm`, `baddbmm` .dtype and .dtype_out:
//   CUDA-only overloads, a half or bf16 product accumulated and written in float32).
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include "harness/instrument/sim/host_compute.h"

namespace harness::sim {
namespace {

at::Tensor softmax_forward(const char* op, bool log, const at::Tensor& self, int64_t dim,
                           bool half_to_float) {
  TORCH_CHECK(!half_to_float || self.scalar_type() == at::kHalf,
              "conversion is supported for Half type only");  // CUDA's check
  return launch_on_host(op, self, [&] {
    const at::Tensor x = half_to_float ? on_host(self).to(at::kFloat) : on_host(self);
    return to_device(log ? at::_log_softmax(x, dim, false) : at::_softmax(x, dim, false),
                     self.device());
  });
}

at::Tensor softmax_backward(const char* op, bool log, const at::Tensor& grad_output,
                            const at::Tensor& output, int64_t dim, at::ScalarType input_dtype) {
  const bool half_to_float = grad_output.scalar_type() != input_dtype;
  return launch_on_host(op, grad_output, [&] {
    const at::Tensor g = on_host(grad_output), y = on_host(output);
    const at::ScalarType dtype = half_to_float ? g.scalar_type() : input_dtype;
    at::Tensor grad = log ? at::_log_softmax_backward_data(g, y, dim, dtype)
                          : at::_softmax_backward_data(g, y, dim, dtype);
    return to_device(half_to_float ? grad.to(input_dtype) : grad, grad_output.device());
  });
}

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_forward("aten::_softmax", false, self, dim, half_to_float);
}
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_forward("aten::_log_softmax", true, self, dim, half_to_float);
}
at::Tensor softmax_backward_data(const at::Tensor& grad_output, const at::Tensor& output,
                                 int64_t dim, at::ScalarType input_dtype) {
  return softmax_backward("aten::_softmax_backward_data", false, grad_output, output, dim,
                          input_dtype);
}
at::Tensor log_softmax_backward_data(const at::Tensor& grad_output, const at::Tensor& output,
                                     int64_t dim, at::ScalarType input_dtype) {
  return softmax_backward("aten::_log_softmax_backward_data", true, grad_output, output, dim,
                          input_dtype);
}

// A product in float32 on the host, as `out_dtype` (CUDA: float32 for a half or bf16 product,
// or the inputs' own dtype).
template <class Product>
at::Tensor product_in(const char* op, const at::Tensor& like, at::ScalarType input_dtype,
                      at::ScalarType out_dtype, Product&& product) {
  TORCH_CHECK(out_dtype == input_dtype ||
                  (out_dtype == at::kFloat &&
                   (input_dtype == at::kHalf || input_dtype == at::kBFloat16)),
              "out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs");
  return launch_on_host(op, like, [&] {
    return to_device(product().to(out_dtype), like.device());
  });
}

at::Tensor& write_out(at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "out: expected ",
              result.scalar_type(), ", got ", out.scalar_type());
  at::Tensor host = on_host(out);
  if (host.sizes() != result.sizes()) {
    out.resize_(result.sizes());
    host = on_host(out);
  }
  host.copy_(on_host(result));
  return out;
}

at::Tensor mm_dtype(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype) {
  return product_in("aten::mm", self, self.scalar_type(), out_dtype, [&] {
    return at::mm(on_host(self).to(at::kFloat), on_host(mat2).to(at::kFloat));
  });
}
at::Tensor bmm_dtype(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype) {
  return product_in("aten::bmm", self, self.scalar_type(), out_dtype, [&] {
    return at::bmm(on_host(self).to(at::kFloat), on_host(mat2).to(at::kFloat));
  });
}
at::Tensor addmm_dtype(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                       at::ScalarType out_dtype, const at::Scalar& beta, const at::Scalar& alpha) {
  return product_in("aten::addmm", mat1, mat1.scalar_type(), out_dtype, [&] {
    return at::addmm(on_host(self).to(at::kFloat), on_host(mat1).to(at::kFloat),
                     on_host(mat2).to(at::kFloat), beta, alpha);
  });
}
at::Tensor baddbmm_dtype(const at::Tensor& self, const at::Tensor& batch1,
                         const at::Tensor& batch2, at::ScalarType out_dtype,
                         const at::Scalar& beta, const at::Scalar& alpha) {
  return product_in("aten::baddbmm", batch1, batch1.scalar_type(), out_dtype, [&] {
    return at::baddbmm(on_host(self).to(at::kFloat), on_host(batch1).to(at::kFloat),
                       on_host(batch2).to(at::kFloat), beta, alpha);
  });
}
// The out= forms: the product (one launch) written into `out` on the host, as CUDA's kernel
// writes its output.
at::Tensor& mm_dtype_out(const at::Tensor& self, const at::Tensor& mat2,
                         at::ScalarType out_dtype, at::Tensor& out) {
  return write_out(out, mm_dtype(self, mat2, out_dtype));
}
at::Tensor& bmm_dtype_out(const at::Tensor& self, const at::Tensor& mat2,
                          at::ScalarType out_dtype, at::Tensor& out) {
  return write_out(out, bmm_dtype(self, mat2, out_dtype));
}
at::Tensor& addmm_dtype_out(const at::Tensor& self, const at::Tensor& mat1,
                            const at::Tensor& mat2, at::ScalarType out_dtype,
                            const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  return write_out(out, addmm_dtype(self, mat1, mat2, out_dtype, beta, alpha));
}
at::Tensor& baddbmm_dtype_out(const at::Tensor& self, const at::Tensor& batch1,
                              const at::Tensor& batch2, at::ScalarType out_dtype,
                              const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  return write_out(out, baddbmm_dtype(self, batch1, batch2, out_dtype, beta, alpha));
}

}  // namespace

void register_cuda_out_dtype(c10::DispatchKey backend) {
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("_softmax", TORCH_FN(softmax));
  impls->impl("_log_softmax", TORCH_FN(log_softmax));
  impls->impl("_softmax_backward_data", TORCH_FN(softmax_backward_data));
  impls->impl("_log_softmax_backward_data", TORCH_FN(log_softmax_backward_data));
  impls->impl("mm.dtype", TORCH_FN(mm_dtype));
  impls->impl("mm.dtype_out", TORCH_FN(mm_dtype_out));
  impls->impl("bmm.dtype", TORCH_FN(bmm_dtype));
  impls->impl("bmm.dtype_out", TORCH_FN(bmm_dtype_out));
  impls->impl("addmm.dtype", TORCH_FN(addmm_dtype));
  impls->impl("addmm.dtype_out", TORCH_FN(addmm_dtype_out));
  impls->impl("baddbmm.dtype", TORCH_FN(baddbmm_dtype));
  impls->impl("baddbmm.dtype_out", TORCH_FN(baddbmm_dtype_out));
}

}  // namespace harness::sim
