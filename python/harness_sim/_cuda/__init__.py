"""What ``python -m harness_sim run --as-cuda`` makes of CUDA: as_cuda (``AsCuda``: installs sim
as CUDA for the program's run and takes it away after) and surface (the table of every public
name of ``torch.cuda``, ``torch.backends.cuda`` / ``cudnn`` and ``torch.accelerator``: mapped,
answered, as is or refused; docs/as-cuda.md). May import _device and the base (``_C``,
``_after_import``); nothing of _frameworks, _run or the public modules.
"""
