// The rules of sync_rules.h, one function per CUDA behaviour, each with the PyTorch 2.11 source it
// follows (paths under aten/src/ATen/native/). Sizes are what the CUDA code reads: nonzero's
// int32 count into a pinned buffer, .item()'s element into a pinned buffer (CUDAScalar.cu), a
// blocking .cpu() / .to(device) into or out of pageable memory.
#include "harness/instrument/sim/sync_rules.h"

#include "harness/instrument/sim/sim_device.h"

#include "harness/instrument/sim/torch_release.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>

#include <optional>
#include <string_view>

namespace harness::sim {
namespace {

using Waits = std::vector<HostWait>;

const c10::IValue& arg(const c10::FunctionSchema& schema, const c10::IValue* args,
                       std::string_view name) {
  const std::optional<int> i = schema.argumentIndexWithName(name);
  TORCH_INTERNAL_ASSERT(i.has_value(), schema.name(), " has no argument '", name, "'");
  return args[*i];
}

const at::Tensor& tensor_arg(const c10::FunctionSchema& schema, const c10::IValue* args,
                             std::string_view name) {
  return arg(schema, args, name).toTensor();
}

bool on_device(const at::Tensor& t) { return is_sim(t); }

bool is_mask(const at::Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

int64_t element_bytes(const at::Tensor& t) { return static_cast<int64_t>(t.element_size()); }

HostWait item(int64_t bytes, const char* reason) {
  return {CopyKind::DeviceToHost, bytes, /*pinned=*/true, reason};
}

// nonzero's count: int32 into a pinned buffer, one memcpy_and_sync (cuda/Nonzero.cu,
// nonzero_cuda_out_impl).
HostWait nonzero_count(const char* reason) { return item(4, reason); }

// The index tensors of an index / index_put call, non-null.
std::vector<at::Tensor> index_tensors(const c10::FunctionSchema& schema, const c10::IValue* args) {
  std::vector<at::Tensor> out;
  for (const std::optional<at::Tensor>& t : arg(schema, args, "indices").toOptionalTensorList()) {
    if (t.has_value() && t->defined()) out.push_back(*t);
  }
  return out;
}

// expandTensors (IndexingUtils.h): a device mask becomes its nonzero(); an index tensor on the
// host is copied to the device, blocking (a host mask is expanded on the host into pinned memory
// and copied without a wait).
void add_index_waits(const std::vector<at::Tensor>& indices, Waits& out) {
  for (const at::Tensor& index : indices) {
    if (on_device(index) && is_mask(index)) {
      out.push_back(nonzero_count("boolean mask index: count read by the host (nonzero)"));
    } else if (!on_device(index) && !is_mask(index) && index.dim() > 0) {
      out.push_back({CopyKind::HostToDevice, static_cast<int64_t>(index.nbytes()), false,
                     "host index tensor copied to the device (blocking)"});
    }
  }
}

Waits nonzero(const c10::FunctionSchema&, const c10::IValue*) {
  return {nonzero_count("output size read by the host (nonzero)")};
}

// cuda/IndexKernel.cpp masked_select_out_cuda_impl: index_out with the mask -> nonzero.
Waits masked_select(const c10::FunctionSchema&, const c10::IValue*) {
  return {nonzero_count("output size read by the host (masked_select -> nonzero)")};
}

// TensorAdvancedIndexing.cpp, the meta function of index.Tensor: make_info -> expandTensors.
Waits index(const c10::FunctionSchema& schema, const c10::IValue* args) {
  Waits out;
  add_index_waits(index_tensors(schema, args), out);
  return out;
}

// TensorAdvancedIndexing.cpp _index_put_impl_: a single device mask with a one-element host value
// is masked_fill_ (canDispatchToMaskedFill, no sync); otherwise the indices as in index, a host
// 0-dim value copied to the device (blocking), and with accumulate (or deterministic algorithms
// and more than one value) cuda/Indexing.cu's wrapIndexOnce reads every index's max and min with
// .item() unless the call is unsafe.
Waits index_put(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  const at::Tensor& values = tensor_arg(schema, args, "values");
  const bool accumulate = arg(schema, args, "accumulate").toBool();
  const bool unsafe = arg(schema, args, "unsafe").toBool();
  const std::vector<at::Tensor> indices = index_tensors(schema, args);
  const bool host_scalar_value = !on_device(values) && values.numel() == 1;
  if (!accumulate && indices.size() == 1 && is_mask(indices[0]) &&
      indices[0].device() == self.device() && host_scalar_value) {
    return {};
  }
  Waits out;
  add_index_waits(indices, out);
  if (!on_device(values) && values.dim() == 0) {
    out.push_back({CopyKind::HostToDevice, element_bytes(values), false,
                   "index_put value copied to the device (blocking)"});
  }
  const bool checks_bounds =
      accumulate || (at::globalContext().deterministicAlgorithms() && values.numel() > 1);
  if (checks_bounds && !unsafe) {
    for (const at::Tensor& index : indices) {
      if (is_mask(index) || index.numel() == 0) continue;
      out.push_back(item(8, "index_put bounds check: index.max().item()"));
      out.push_back(item(8, "index_put bounds check: index.min().item()"));
    }
  }
  return out;
}

// cuda/Unique.cu unique_dim_cuda_template: Thrust algorithms on the stream, each synchronous:
// sort (not when consecutive), unique (its end, the output size, read back), and with
// return_inverse adjacent_difference, inclusive_scan and scatter, with return_counts
// adjacent_difference. (Counted from the calls in the source; no GPU here confirmed Thrust's.)
Waits unique_dim(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  const c10::IValue& dim_value = arg(schema, args, "dim");
  if (dim_value.isNone()) return {};
  const int64_t dim = c10::maybe_wrap_dim(dim_value.toInt(), self.dim());
  if (self.size(dim) == 0) return {};
  const bool consecutive = schema.name() != "aten::unique_dim";  // or unique_consecutive(dim)
  Waits out;
  if (!consecutive) out.push_back({CopyKind::DeviceToHost, 0, false, "unique_dim: thrust::sort"});
  out.push_back({CopyKind::DeviceToHost, 8, false, "unique_dim: thrust::unique, size read back"});
  if (arg(schema, args, "return_inverse").toBool()) {
    for (const char* step : {"unique_dim: thrust::adjacent_difference (inverse)",
                             "unique_dim: thrust::inclusive_scan (inverse)",
                             "unique_dim: thrust::scatter (inverse)"}) {
      out.push_back({CopyKind::DeviceToHost, 0, false, step});
    }
  }
  if (arg(schema, args, "return_counts").toBool()) {
    out.push_back({CopyKind::DeviceToHost, 0, false, "unique_dim: thrust::adjacent_difference"});
  }
  return out;
}

// cuda/Unique.cu (_unique2_cuda, _unique_cuda, unique_consecutive_cuda) -> cuda/UniqueCub.cu
// compute_unique: the number of unique values with .item(); for bool (not consecutive),
// UniqueCub<bool> copies the count of trues into a host int with memcpy_and_sync.
Waits unique(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  if (self.numel() == 0) return {};
  const bool consecutive = schema.name() == "aten::unique_consecutive";
  if (consecutive && !arg(schema, args, "dim").isNone()) return unique_dim(schema, args);
  if (self.scalar_type() == at::kBool && !consecutive) {
    return {{CopyKind::DeviceToHost, 4, false, "unique: count of trues read by the host"}};
  }
  return {item(8, "unique: output size read by the host (.item())")};
}

// Repeat.h repeat_interleave_common: without output_size, (repeats >= 0).all().item() and the
// output size, cumsum[-1].item().
Waits repeat_interleave(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& repeats = tensor_arg(schema, args, "repeats");
  if (!arg(schema, args, "output_size").isNone() || repeats.dim() != 1 || repeats.size(0) == 0) {
    return {};
  }
  return {item(1, "repeat_interleave: (repeats >= 0).all().item()"),
          item(8, "repeat_interleave: output size read by the host (cumsum[-1].item())")};
}

// cuda/SummaryOps.cu _bincount_cuda_template: self.min().cpu() (skipped for uint8) and
// self.max().item() size the output.
Waits bincount(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  if (self.dim() != 1 || self.numel() == 0) return {};
  Waits out;
  if (self.scalar_type() != at::kByte) {
    out.push_back({CopyKind::DeviceToHost, element_bytes(self), false,
                   "bincount: self.min().cpu() (blocking)"});
  }
  out.push_back(item(element_bytes(self), "bincount: output size read (self.max().item())"));
  return out;
}

// cuda/SummaryOps.cu _histc_cuda_template: with min == max, the range is read from the data.
Waits histc(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  if (self.numel() == 0 ||
      arg(schema, args, "min").toScalar().toDouble() != arg(schema, args, "max").toScalar().toDouble()) {
    return {};
  }
  return {item(element_bytes(self), "histc: range read by the host (min)"),
          item(element_bytes(self), "histc: range read by the host (max)")};
}

// Distributions.cpp multinomial_out: without replacement or for one sample, the probabilities
// are checked ((max < inf) & (min >= 0)).item() and (sum == 0) read on the host.
Waits multinomial(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  const bool replacement = arg(schema, args, "replacement").toBool();
  const int64_t samples = arg(schema, args, "num_samples").toInt();
  if ((replacement && samples != 1) || self.numel() == 0 || samples == 0) return {};
  return {item(1, "multinomial: probabilities checked on the host"),
          item(self.dim() == 1 ? 1 : 8, "multinomial: zero-sum rows checked on the host")};
}

// DistributionTemplates.h CHECK_NORMAL_TENSOR_STD before 2.14 (torch_release.h): a non-empty
// tensor std is checked with std.min().ge(0).item(), by normal_impl and again by the
// normal_out_impl it calls (an out= variant: once).
Waits normal_tensor_std(const c10::FunctionSchema& schema, const c10::IValue* args) {
  if (!torch_release::kNormalReadsTensorStdOnHost) return {};
  if (tensor_arg(schema, args, "std").numel() == 0) return {};
  const std::string& overload = schema.overload_name();
  const bool out = overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0;
  Waits waits{item(1, "normal: std >= 0 checked on the host (std.min().ge(0).item())")};
  if (!out) waits.push_back(waits.front());
  return waits;
}

// cuda/Indexing.cu masked_fill__cuda (Tensor value) and TensorAdvancedIndexing.cpp index_fill_
// (Tensor source): a device value is read with .item().
Waits value_item(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const char* name = schema.name() == "aten::index_fill_" ? "source" : "value";
  const at::Tensor& value = tensor_arg(schema, args, name);
  if (!on_device(value)) return {};
  return {item(element_bytes(value), "fill value read by the host (.item())")};
}

// cuda/Equal.cpp cuda_equal: eq(self, other).all().item(), unless sizes differ, there is nothing
// to compare, or both are the same view.
Waits equal(const c10::FunctionSchema& schema, const c10::IValue* args) {
  const at::Tensor& self = tensor_arg(schema, args, "self");
  const at::Tensor& other = tensor_arg(schema, args, "other");
  if (self.sizes() != other.sizes() || self.numel() == 0) return {};
  if (self.is_alias_of(other) && self.storage_offset() == other.storage_offset() &&
      self.dtype() == other.dtype() && self.strides() == other.strides()) {
    return {};
  }
  return {item(1, "equal: result read by the host (.item())")};
}

}  // namespace

const std::vector<SyncRuleEntry>& sync_rules() {
  static const std::vector<SyncRuleEntry> rules = {
      {"aten::nonzero", {"", "out"}, &nonzero, false, "cuda/Nonzero.cu: nonzero_cuda_out_impl"},
      {"aten::masked_select", {"", "out"}, &masked_select, false,
       "cuda/IndexKernel.cpp: masked_select_out_cuda_impl"},
      {"aten::index", {"Tensor", "Tensor_out"}, &index, true,
       "TensorAdvancedIndexing.cpp: meta index.Tensor -> IndexingUtils.h: expandTensors"},
      {"aten::_index_put_impl_", {""}, &index_put, true,
       "TensorAdvancedIndexing.cpp: _index_put_impl_; cuda/Indexing.cu: wrapIndexOnce"},
      {"aten::_unique2", {""}, &unique, false, "cuda/Unique.cu, cuda/UniqueCub.cu: compute_unique"},
      {"aten::_unique", {""}, &unique, false, "cuda/Unique.cu, cuda/UniqueCub.cu: compute_unique"},
      {"aten::unique_consecutive", {""}, &unique, false,
       "cuda/Unique.cu: unique_consecutive_cuda"},
      {"aten::unique_dim", {""}, &unique_dim, false, "cuda/Unique.cu: unique_dim_cuda_template"},
      {"aten::unique_dim_consecutive", {""}, &unique_dim, false,
       "cuda/Unique.cu: unique_dim_cuda_template"},
      {"aten::repeat_interleave", {"Tensor"}, &repeat_interleave, false,
       "Repeat.h: repeat_interleave_common"},
      {"aten::bincount", {""}, &bincount, false, "cuda/SummaryOps.cu: _bincount_cuda_template"},
      {"aten::histc", {"", "out"}, &histc, false, "cuda/SummaryOps.cu: _histc_cuda_template"},
      {"aten::multinomial", {"", "out"}, &multinomial, false, "Distributions.cpp: multinomial_out"},
      {"aten::masked_fill_", {"Tensor"}, &value_item, false, "cuda/Indexing.cu: masked_fill__cuda"},
      {"aten::normal", {"float_Tensor", "float_Tensor_out", "Tensor_Tensor", "Tensor_Tensor_out"},
       &normal_tensor_std, false, "DistributionTemplates.h: CHECK_NORMAL_TENSOR_STD (before 2.14)"},
      {"aten::index_fill_", {"int_Tensor"}, &value_item, false,
       "TensorAdvancedIndexing.cpp: index_fill_"},
      {"aten::equal", {""}, &equal, false, "cuda/Equal.cpp: cuda_equal"},
  };
  return rules;
}

}  // namespace harness::sim
