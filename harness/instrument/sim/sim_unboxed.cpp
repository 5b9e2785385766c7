// The hottest ops on sim, unboxed (issue 50): a training step's matmuls, activations, losses,
// layer norm and the optimizers' foreach ops. Each is one launch, as the boxed fallback counts it
// (sim_kernels.cpp), but its arguments are not boxed into IValues and unboxed again around the
// CPU kernel -- in a foreach Adam step that boxing cost as much as the CPU aliases themselves.
// The CPU kernel runs on the CPU aliases of the sim tensors, as in the fallback. What the fallback
// does besides is left to it: a call under Compute::kShapes, or with a CPU tensor (a scalar the
// kernel reads at launch), an undefined tensor or tensors of two devices among its arguments, is
// boxed here and handed over unchanged, with the fallback's rules and messages.
#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_maximum_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_neg_ops.h>
#include <ATen/ops/_foreach_norm_ops.h>
#include <ATen/ops/_foreach_reciprocal_ops.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/_foreach_sub_ops.h>
#include <ATen/ops/_foreach_zero_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/zero_ops.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "harness/instrument/collector.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/sim/sim_internal.h"

namespace harness::sim {
namespace {

// One call's sim tensors and their CPU aliases. Two passes over the arguments: accepts() checks
// them (and counts the tensors), then to_cpu() aliases them into one array reserved for all of
// them, so that a single tensor's alias is passed by reference and a list's as a view of the
// array -- no copies of the aliases, whose reference counts are atomic.
class UnboxedCall {
 public:
  // Whether every tensor argument is a defined sim tensor of one device, or a number of the
  // program's as torch wraps it (numbers, scalars and absent optionals -- none, or an undefined
  // tensor -- always are fine): what the fast path takes. A written tensor or a list's is a sim one.
  bool accepts(const at::Tensor& t) {
    if (!t.defined()) return false;
    if (is_wrapped_number(t)) return true;  // passed as it is: no alias, not a device
    return accepts_sim(t);
  }
  bool accepts(at::Tensor& t) { return t.defined() && accepts_sim(t); }  // written: a sim tensor
  bool accepts(at::TensorList list) {
    for (const at::Tensor& t : list) {
      if (!t.defined() || !accepts_sim(t)) return false;
    }
    return true;
  }
  // An optional holding an undefined tensor is absent, as kernels read it (autograd hands an
  // unsaved weight over so: native_layer_norm_backward without an affine).
  bool accepts(const std::optional<at::Tensor>& t) {
    return !t.has_value() || !t->defined() || accepts(*t);
  }
  template <class T>
  bool accepts(const T&) {
    return true;
  }
  // A call with no tensor argument (none here; the fallback knows a factory's device).
  bool found_a_device() const { return device_.has_value(); }

  // After accepts(): room for every alias, so that none moves while the kernel's arguments refer
  // to them.
  void reserve() {
    aliases_.reserve(tensors_);
    aliased_.reserve(tensors_);
  }

  // The CPU kernel's arguments: aliases for the tensors, the rest as they are. `written`: the
  // op may write it (a `Tensor&`, an in-place foreach op's `self` list).
  at::TensorList to_cpu(at::TensorList list, bool written) {
    for (const AliasedList& seen : lists_) {  // the same list again (addcmul_(v, g, g)): its aliases
      if (same_tensors(seen.sim, list)) return seen.cpu;
    }
    const size_t begin = aliases_.size();
    for (const at::Tensor& t : list) alias(t, written);
    const at::TensorList cpu(aliases_.data() + begin, list.size());
    lists_.push_back({list, cpu});
    return cpu;
  }
  const at::Tensor& to_cpu(const at::Tensor& t, bool written) {
    return is_wrapped_number(t) ? t : single(t, written);
  }
  at::Tensor& to_cpu(at::Tensor& t, bool written) { return single(t, written); }
  std::optional<at::Tensor> to_cpu(const std::optional<at::Tensor>& t, bool) {
    return t.has_value() && t->defined() && !is_wrapped_number(*t)
               ? std::optional<at::Tensor>(single(*t, false))
               : t;
  }
  template <class T>
  const T& to_cpu(const T& value, bool) {
    return value;
  }

  // A result as a sim tensor: the argument it is (self, out=), else new device memory.
  at::Tensor to_sim(const at::Tensor& result) const {
    const Aliased* argument = find(result, /*written_only=*/false);
    return argument != nullptr ? *argument->sim : to_device(result, *device_);
  }
  // A reference result (an in-place op's): the caller's argument it is, a written one (`self`;
  // in `x.add_(x)` both arguments have one alias).
  at::Tensor& to_sim_argument(const at::Tensor& result) const {
    const Aliased* argument = find(result, /*written_only=*/true);
    TORCH_INTERNAL_ASSERT(argument != nullptr,
                          "an op returned a reference to none of its written arguments");
    return const_cast<at::Tensor&>(*argument->sim);  // the caller's `Tensor&`
  }

  c10::Device device() const { return *device_; }

 private:
  // A tensor the kernel gets an alias of: a sim tensor, of the call's one device.
  bool accepts_sim(const at::Tensor& t) {
    ++tensors_;
    const c10::Device device = t.device();
    if (!device_) {
      if (!is_sim_type(device.type())) return false;
      device_ = device;
    }
    return *device_ == device;  // (so a sim device too)
  }

  static bool is_wrapped_number(const at::Tensor& t) {
    return t.unsafeGetTensorImpl()->is_wrapped_number();
  }

  struct Aliased {
    const at::Tensor* sim;  // an argument: the caller holds it for the call
    uint32_t index;         // its alias in aliases_
    bool written;
  };
  struct AliasedList {
    at::TensorList sim, cpu;
  };

  // Whether two lists hold the same tensors (autograd hands each list argument over as a copy of
  // its own, so the lists of `addcmul_(v, g, g)` are two vectors).
  static bool same_tensors(at::TensorList a, at::TensorList b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].unsafeGetTensorImpl() != b[i].unsafeGetTensorImpl()) return false;
    }
    return true;
  }

  // A single tensor's alias: the one it has already in this call (`x.mul_(x)`: one alias, as the
  // CPU kernel would get one tensor), else a new entry.
  at::Tensor& single(const at::Tensor& t, bool written) {
    for (Aliased& a : aliased_) {
      if (a.sim->unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        a.written = a.written || written;
        return aliases_[a.index];
      }
    }
    return alias(t, written);
  }

  at::Tensor& alias(const at::Tensor& t, bool written) {
    aliased_.push_back({&t, static_cast<uint32_t>(aliases_.size()), written});
    return aliases_.emplace_back(cached_cpu_alias(t, inference_));
  }

  const Aliased* find(const at::Tensor& cpu, bool written_only) const {
    for (const Aliased& a : aliased_) {
      if ((a.written || !written_only) &&
          aliases_[a.index].unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) {
        return &a;
      }
    }
    return nullptr;
  }

  std::optional<c10::Device> device_;
  const bool inference_ = c10::InferenceMode::is_enabled();
  size_t tensors_ = 0;
  c10::SmallVector<at::Tensor, 8> aliases_;   // reserved for all before the first is made
  c10::SmallVector<Aliased, 8> aliased_;
  c10::SmallVector<AliasedList, 4> lists_;
};

// Whether `Op` (an at::_ops struct) is a foreach op that writes its first tensor list (in place:
// `_foreach_add_`; its `self` is a TensorList, not a `Tensor&`).
template <class Op>
constexpr bool foreach_writes_self() {
  const std::string_view name(Op::name);
  return name.rfind("aten::_foreach_", 0) == 0 && name.back() == '_';
}

// The boxed fallback, for a call the fast path does not take: boxed here as the dispatcher
// boxes a call for a boxed kernel. Returns the stack with the op's results.
template <class Op, class... Args>
torch::jit::Stack run_boxed(Args... args) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
  torch::jit::Stack stack = c10::impl::boxArgs<Args...>(args...);
  run_boxed_fallback(op, &stack);
  return stack;
}

template <class Op, class Schema = typename Op::schema>
struct UnboxedOp;

template <class Op, class R, class... Args>
struct UnboxedOp<Op, R(Args...)> {
  static R call(c10::DispatchKeySet, Args... args) {
    UnboxedCall call;
    if (computes_shapes_only() || !(call.accepts(args) && ...) || !call.found_a_device()) {
      return boxed(args...);
    }
    const int64_t begin = events::tracing() ? events::begin_time() : 0;
    // Left to right (a braced list): the first tensor list is a foreach op's `self`.
    bool first_list = true;
    auto written = [&first_list](const auto& arg) {
      using Arg = std::decay_t<decltype(arg)>;
      if constexpr (std::is_same_v<Arg, at::TensorList>) {
        const bool self = first_list;
        first_list = false;
        return self && foreach_writes_self<Op>();
      } else {
        return false;
      }
    };
    call.reserve();
    std::tuple<decltype(call.to_cpu(std::declval<Args>(), false))...> cpu_args{
        call.to_cpu(args, written(args) || is_mutable_tensor<Args>())...};
    std::optional<c10::DeviceGuard> guard;  // only when the op's device is not the current one
    if (call.device().index() != current_device()) guard.emplace(call.device());
    const memory::ChargeTo charge_to(call.device().index());  // what the kernel allocates
    auto run = [](auto&... a) -> decltype(auto) { return Op::redispatch(kCpuKeys, a...); };
    if constexpr (std::is_void_v<R>) {
      std::apply(run, cpu_args);
      events::record_launch(Op::name, begin);
    } else {
      decltype(auto) results = std::apply(run, cpu_args);
      events::record_launch(Op::name, begin);
      return results_to_sim(call, std::forward<decltype(results)>(results));
    }
  }

 private:
  template <class Arg>
  static constexpr bool is_mutable_tensor() {
    return std::is_same_v<Arg, at::Tensor&>;
  }

  // The call as the fallback runs it. A `Tensor&` result is an argument itself, which the
  // fallback, returning values, cannot give: it is the argument the schema says (self), the one
  // the CPU kernel returned when it ran there.
  static R boxed(Args... args) {
    torch::jit::Stack stack = run_boxed<Op, Args...>(args...);
    if constexpr (std::is_same_v<R, at::Tensor&>) {
      const at::Tensor& result = stack.back().toTensor();
      at::Tensor* found = nullptr;
      (
          [&](auto& arg) {
            if constexpr (std::is_same_v<decltype(arg), at::Tensor&>) {  // self, or out=
              if (found == nullptr && arg.unsafeGetTensorImpl() == result.unsafeGetTensorImpl()) {
                found = &arg;
              }
            }
          }(args),
          ...);
      TORCH_INTERNAL_ASSERT(found != nullptr, Op::name, " returned a reference to no argument");
      return *found;
    } else if constexpr (!std::is_void_v<R>) {
      return c10::impl::PopResult<R>::call(stack);
    }
  }

  // The CPU kernel's results as the caller gets them: sim tensors.
  static R results_to_sim(const UnboxedCall& call, const at::Tensor& result) {
    if constexpr (std::is_same_v<R, at::Tensor&>) {
      return call.to_sim_argument(result);
    } else {
      return call.to_sim(result);
    }
  }
  static R results_to_sim(const UnboxedCall& call, std::vector<at::Tensor>&& results) {
    for (at::Tensor& t : results) t = call.to_sim(t);
    return std::move(results);
  }
  template <class... Tensors>
  static R results_to_sim(const UnboxedCall& call, std::tuple<Tensors...>&& results) {
    std::apply([&call](auto&... t) { ((t = call.to_sim(t)), ...); }, results);
    return std::move(results);
  }
};

// Registers `Op`'s unboxed kernel at `backend` where its calls reach the fallback now: no kernel of
// sim's own (sync rules, cuda_*.cpp), no composite that runs before a backend's fallback (which a
// backend kernel would override) -- except a foreach op's loop and a structured op's functional
// wrapper, which register_own_kernel_ops routes to the fallback as CUDA has kernels of its own.
// `over_fallback`: the backend's kernels are take_over()'s fallback (CUDA under libtorch_cuda),
// none of them sim's own for the ops below.
// `cuda_kernel_op`: an op of cuda_kernel_ops.inc (CUDA has a kernel of its own where other
// backends take a composite), which register_own_kernel_ops routes to the fallback likewise.
template <class Op>
void register_unboxed(torch::Library& impls, c10::DispatchKey backend, bool over_fallback,
                      bool cuda_kernel_op = false) {
  const auto op = c10::Dispatcher::singleton().findOp({Op::name, Op::overload_name});
  if (!op || (!over_fallback && op->hasKernelForDispatchKey(backend)) ||
      op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
    return;
  }
  const bool foreach_op = std::string_view(Op::name).rfind("aten::_foreach_", 0) == 0;
  if (!foreach_op && !cuda_kernel_op &&
      op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
    return;
  }
  for (const c10::Argument& result : op->schema().returns()) {
    if (result.alias_info() != nullptr && !result.alias_info()->isWrite()) return;  // a view
  }
  // An out= argument may be resized by the CPU kernel (its storage grown): the fallback adopts
  // that. An in-place op's `self` (the only other written argument) keeps its storage and
  // geometry -- a CPU kernel refuses a result of another shape -- so nothing is adopted here.
  for (const c10::Argument& argument : op->schema().arguments()) {
    if (argument.is_out()) return;
  }
  std::string qualified = std::string(Op::name).substr(6);  // without "aten::"
  if (*Op::overload_name != '\0') qualified += std::string(".") + Op::overload_name;
  impls.impl(qualified.c_str(), TORCH_FN(UnboxedOp<Op>::call));
}

}  // namespace

void register_unboxed_kernels(torch::Library& impls, c10::DispatchKey backend, bool over_fallback) {
  namespace ops = at::_ops;
  // torch.optim's foreach Adam, AdamW and SGD, clip_grad_norm_, and the runtime's optimizers.
  register_unboxed<ops::_foreach_add__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_add__List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_add__ScalarList>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_add__Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_add_Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_add_List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_sub__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_sub__List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_sub__ScalarList>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_mul__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_mul__List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_mul__ScalarList>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_mul__Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_div__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_div__List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_div__ScalarList>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_div__Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_lerp__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_lerp__List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_addcmul__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_addcmul__ScalarList>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_addcdiv__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_addcdiv__ScalarList>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_sqrt>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_sqrt_>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_maximum__List>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_neg>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_neg_>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_reciprocal_>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_zero_>(impls, backend, over_fallback);
  register_unboxed<ops::_foreach_norm_Scalar>(impls, backend, over_fallback);
  // A step's matmuls, elementwise ops, activations and losses, forward and backward.
  register_unboxed<ops::addmm>(impls, backend, over_fallback);
  register_unboxed<ops::mm>(impls, backend, over_fallback);
  register_unboxed<ops::bmm>(impls, backend, over_fallback);
  register_unboxed<ops::add_Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::add__Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::sub_Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::mul_Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::mul__Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::div_Tensor>(impls, backend, over_fallback);
  register_unboxed<ops::relu>(impls, backend, over_fallback);
  register_unboxed<ops::threshold_backward>(impls, backend, over_fallback);
  register_unboxed<ops::gelu>(impls, backend, over_fallback);
  register_unboxed<ops::gelu_backward>(impls, backend, over_fallback);
  register_unboxed<ops::sum_dim_IntList>(impls, backend, over_fallback);
  register_unboxed<ops::mse_loss>(impls, backend, over_fallback);
  register_unboxed<ops::mse_loss_backward>(impls, backend, over_fallback);
  // Normalization, forward (a CUDA kernel of its own: cuda_kernel_ops.inc) and backward.
  register_unboxed<ops::native_layer_norm>(impls, backend, over_fallback, /*cuda_kernel_op=*/true);
  register_unboxed<ops::native_layer_norm_backward>(impls, backend, over_fallback);
  // Filling: zero_grad(set_to_none=False), backward's seed (ones_like).
  register_unboxed<ops::fill__Scalar>(impls, backend, over_fallback);
  register_unboxed<ops::zero_>(impls, backend, over_fallback);
}

}  // namespace harness::sim
