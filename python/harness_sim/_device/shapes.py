"""What ``--compute shapes`` (sim runs each op's meta function only; docs/full-size.md) changes on
the Python side: printing a device tensor shows its shape instead of its values, which were never
computed (torch's printing would run data-dependent ops on it, ``masked_select``, whose output
size no meta function knows). Each such print is recorded as a ``value_not_computed`` event at
the printing line; the ops torch runs to print a tensor with values are not counted here.

And an op whose output size depends on values (``nonzero``, boolean-mask indexing ``x[mask]``,
``masked_select``) takes torch's documented bound, its largest size: every element selected
(``torch.fx.experimental._config.meta_nonzero_assume_all_nonzero``), the data taken to be valid
as the placeholder of ``all()`` is (docs/full-size.md). Ops with no such bound (``unique``) fail,
naming the op. Imports only torch and the package's C++ module."""
from __future__ import annotations

import torch

from .. import _C


def _placeholder_str(original):
    def _str(self, *, tensor_contents=None):
        if self.device.type in ("cpu", "meta") or self.is_meta:
            return original(self, tensor_contents=tensor_contents)
        _C.record_event("value_not_computed", "print")
        return (f"tensor(<values not computed: --compute shapes>, size={tuple(self.shape)}, "
                f"device='{self.device}', dtype={self.dtype})")
    return _str


def install() -> None:
    """In a process that computes shapes only (idempotent)."""
    import torch._tensor_str as tensor_str

    if _C.compute() != "shapes" or getattr(tensor_str._str, "_harness_sim", False):
        return
    import torch.fx.experimental._config as fx_config

    fx_config.meta_nonzero_assume_all_nonzero = True
    placeholder = _placeholder_str(tensor_str._str)
    placeholder._harness_sim = True
    tensor_str._str = placeholder
