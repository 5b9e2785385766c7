"""The sim device inside torch, and the instrument's Python side.

mode (which device type sim serves in this process, values or shapes), module (``torch.sim``),
distributed (the counting c10d backend), compile (inductor's and dynamo's backend for sim),
shapes (``--compute shapes`` printing), sites (how sites name files), counting (``count()``,
``phase()``, ``allow_sync()``, reports). May import only the base: ``_C``, ``_version``,
``_after_import`` (and torch); nothing of _cuda, _frameworks, _run or the public modules.
"""
