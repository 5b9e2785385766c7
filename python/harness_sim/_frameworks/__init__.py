"""Training frameworks on sim: Lightning (lightning: the accelerator, strategies and callbacks;
lightning_run: the import hook and the callbacks entry point), DeepSpeed (deepspeed: the
accelerator; deepspeed_run: the import hook), the pytest plugin (pytest_plugin), and active_run,
what ``python -m harness_sim run`` hands them while it counts a program. The public modules
harness_sim.lightning, .deepspeed and .pytest re-export them. May import the layers below it,
_cuda, _device and the base; nothing of _run or the public modules (run, above, hands its state
down through active_run).
"""
