"""Lightning on sim: ``lightning.Trainer(accelerator=SimAccelerator(), devices=1)`` trains on the
simulated device, and ``CountingCallback`` counts the training steps with harness_sim."""
from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch import Callback
from lightning.pytorch.accelerators import Accelerator
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

from .._device import module as sim
from .._device.counting import Counts, count, phase
from .._device.mode import BACKEND_NAME, device as sim_device
from . import active_run


class SimAccelerator(Accelerator):
    """The sim device as a Lightning accelerator (one process; devices=N picks sim:0..N-1).

    ``Trainer(accelerator=SimAccelerator(), devices=1)`` trains on sim:0. Lightning gives an
    accelerator it does not know a single-device strategy on the CPU (its accelerator connector
    names only CUDA and MPS there); ``setup`` points that strategy at the sim device before the
    model, the batches or a resumed optimizer state are moved."""

    def setup_device(self, device: torch.device) -> None:
        if device.type == "cpu":
            return  # Lightning's placeholder for a single device: setup() replaces it
        if device.type != BACKEND_NAME:
            raise ValueError(f"SimAccelerator got device {device}, not a sim device")
        torch.sim.set_device(device.index or 0)

    def setup(self, trainer) -> None:
        strategy = trainer.strategy
        if isinstance(strategy, SingleDeviceStrategy) and strategy.root_device.type == "cpu":
            devices = getattr(trainer._accelerator_connector, "_parallel_devices", None) or []
            device = devices[0] if devices else sim_device(0)
            strategy._root_device = device
            self.setup_device(device)

    def teardown(self) -> None:
        pass

    @staticmethod
    def parse_devices(devices: Any) -> list[int]:
        count = sim.device_count()
        if devices in (-1, "-1", "auto"):
            return list(range(count))
        if isinstance(devices, str):
            devices = [int(d) for d in devices.split(",") if d.strip()] if "," in devices \
                else int(devices)
        if isinstance(devices, int):
            if not 0 < devices <= count:
                raise ValueError(f"devices={devices}: sim has {count} devices")
            return list(range(devices))
        devices = [int(d) for d in devices]
        if any(not 0 <= d < count for d in devices):
            raise ValueError(f"devices={devices}: sim has devices 0..{count - 1}")
        return devices

    @staticmethod
    def get_parallel_devices(devices: Any) -> list[torch.device]:
        return [sim_device(i) for i in devices]

    @staticmethod
    def auto_device_count() -> int:
        return sim.device_count()

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def name() -> str:
        return BACKEND_NAME

    def get_device_stats(self, device: Any) -> dict[str, Any]:
        index = torch.device(device).index or 0
        return {"allocated_bytes": sim.memory_allocated(index),
                "peak_allocated_bytes": sim.max_memory_allocated(index)}

    @classmethod
    def register_accelerators(cls, accelerator_registry: Any) -> None:
        accelerator_registry.register(cls.name(), cls, description="harness_sim's simulated device")


class CountingCallback(Callback):
    """Counts every training batch (``train.step`` phase, one ``c.step()`` each) into ``counts``
    from the first training batch to the end of training: a resume's restoring and the teardown
    (state moved back to the host) are not counted."""

    def __init__(self, counts: Counts | None = None):
        self.counts = counts if counts is not None else count()
        self._phase: phase | None = None
        self._counting = False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if not self._counting:
            self.counts.__enter__()
            self._counting = True
        self.counts._session.begin_step()
        self._phase = phase("train.step").__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._phase is not None:
            self._phase.__exit__(None, None, None)
            self._phase = None
        self.counts._session.end_step()

    def on_train_end(self, trainer, pl_module) -> None:
        if self._counting:
            self.counts.__exit__(None, None, None)
            self._counting = False

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.on_train_batch_end(trainer, pl_module, None, None, 0)
        self.on_train_end(trainer, pl_module)


class SimDDPStrategy(DDPStrategy):
    """Lightning's DDP, which also runs on sim ranks: ``Trainer(accelerator="sim", devices=2)``
    with ``strategy="ddp"``, ``"auto"`` (Lightning picks "ddp" for several devices) or
    ``"ddp_sim"``.

    Lightning's DDPStrategy cannot run on a device it does not know (strategies/ddp.py, 2.6): it
    gives any device but CUDA the Gloo process group, which has no collectives for sim tensors,
    and it builds DistributedDataParallel inside ``torch.cuda.stream(torch.cuda.Stream())``
    whenever the device is not the CPU, which fails without CUDA. On a sim root device this
    class differs in those two only: the process group has harness_sim's counting backend for
    sim tensors beside Gloo for CPU tensors (``"cpu:gloo,sim:sim"``, unless the program chose a
    backend), and DistributedDataParallel gets no ``device_ids`` (a module on one device needs
    none). On any other device it is DDPStrategy unchanged, so ``import harness_sim`` registers
    it as Lightning's "ddp" too (with Lightning's own start method)."""

    strategy_name = "ddp_sim"

    def _get_process_group_backend(self) -> str:
        if self._process_group_backend is None and self.root_device.type == BACKEND_NAME:
            return "cpu:gloo,sim:sim"
        return super()._get_process_group_backend()

    def _configure_launcher(self) -> None:
        super()._configure_launcher()
        _count_started_ranks(self)

    def determine_ddp_device_ids(self):
        if self.root_device.type == BACKEND_NAME:
            return None
        return super().determine_ddp_device_ids()

    @classmethod
    def register_strategies(cls, strategy_registry: Any) -> None:
        strategy_registry.register(cls.strategy_name, cls,
                                   description="DDP on harness_sim's simulated devices")
        # "ddp" as Lightning registers it (DDPStrategy.register_strategies), this class in its
        # place: the same strategy wherever the device is not sim.
        if "ddp" not in strategy_registry or \
                strategy_registry["ddp"]["strategy"] is DDPStrategy:
            strategy_registry.register("ddp", cls, description="DDP strategy with `start_method` "
                                       "'popen' (harness_sim: on sim ranks too)", override=True,
                                       start_method="popen")


def _count_started_ranks(strategy) -> None:
    """Under `python -m harness_sim run`, the local ranks Lightning starts by running the program
    again run under `run` too, so that rank 0's report holds every rank's count."""
    if active_run.started_ranks() is not None and \
            type(strategy._launcher) is _SubprocessScriptLauncher:
        strategy._launcher = _RankCountingLauncher(strategy.cluster_environment,
                                                   strategy.num_processes, strategy.num_nodes)


def _deepspeed_on_sim() -> None:
    """Lightning's own DeepSpeedStrategy (``DeepSpeedStrategy(stage=3)``, ``"deepspeed_stage_3"``)
    on sim ranks, changed in place because a program builds the strategy itself. On a sim root
    device it differs from Lightning's in three places only, as SimDDPStrategy does from DDP: no
    "only supported on CUDA GPUs" error (setup_environment checks for CUDAAccelerator; DeepSpeed
    gets sim as its accelerator from harness_sim.deepspeed), the process group
    ``"cpu:gloo,sim:sim"`` (for deepspeed.init_distributed), and, under `python -m harness_sim
    run`, the ranks it starts run under `run` too. On any other device it is Lightning's."""
    from lightning.pytorch.strategies import DeepSpeedStrategy
    if getattr(DeepSpeedStrategy, "_harness_sim", False):
        return
    setup_environment = DeepSpeedStrategy.setup_environment
    backend = DeepSpeedStrategy._get_process_group_backend
    configure_launcher = DeepSpeedStrategy._configure_launcher

    def sim_setup_environment(self) -> None:
        if self.root_device.type != BACKEND_NAME:
            return setup_environment(self)
        DDPStrategy.setup_environment(self)  # what Lightning's runs after its CUDA check
        return None

    def sim_process_group_backend(self) -> str:
        if self._process_group_backend is None and \
                self.root_device.type == BACKEND_NAME:
            return "cpu:gloo,sim:sim"
        return backend(self)

    def sim_configure_launcher(self) -> None:
        configure_launcher(self)
        _count_started_ranks(self)

    DeepSpeedStrategy.setup_environment = sim_setup_environment
    DeepSpeedStrategy._get_process_group_backend = sim_process_group_backend
    DeepSpeedStrategy._configure_launcher = sim_configure_launcher
    DeepSpeedStrategy._harness_sim = True


class _RankCountingLauncher(_SubprocessScriptLauncher):
    """Lightning's launcher for strategy "ddp" (start method "popen"), starting each local rank
    under `python -m harness_sim run` (active_run.started_ranks()'s command) instead of as
    `python SCRIPT`: the command Lightning builds, its plain one or, for a program under Hydra,
    its Hydra one (the script with the same overrides, rank 0's run directory and the original
    working directory).
    Lightning's observer of those ranks is not started: run's watchdog watches them (a rank that
    dies ends run with exit 3, the others stopped), where Lightning's would SIGKILL every process,
    run's too, within 5 s of a failure, racing run's own end (_run.watch)."""

    def launch(self, function, *args, trainer=None, **kwargs):
        from lightning.pytorch.strategies.launchers import subprocess_script

        observe = getattr(subprocess_script, "_launch_process_observer", None)
        if observe is None:  # a Lightning without one
            return super().launch(function, *args, trainer=trainer, **kwargs)
        subprocess_script._launch_process_observer = lambda child_processes: None
        try:
            return super().launch(function, *args, trainer=trainer, **kwargs)
        finally:
            subprocess_script._launch_process_observer = observe

    def _call_children_scripts(self) -> None:
        from lightning.pytorch.strategies.launchers import subprocess_script

        ranks = active_run.started_ranks()
        basic_command = subprocess_script._basic_subprocess_cmd
        hydra_command = subprocess_script._hydra_subprocess_cmd

        def counted_hydra_command(local_rank: int):
            command, cwd = hydra_command(local_rank=local_rank)
            return ranks.command(list(command)), cwd

        subprocess_script._basic_subprocess_cmd = lambda: ranks.command(list(basic_command()))
        subprocess_script._hydra_subprocess_cmd = counted_hydra_command
        try:
            super()._call_children_scripts()
        finally:
            subprocess_script._basic_subprocess_cmd = basic_command
            subprocess_script._hydra_subprocess_cmd = hydra_command
        ranks.procs.extend(self.procs)


def register_accelerator() -> None:
    """``Trainer(accelerator="sim")`` and ``--trainer.accelerator sim``: SimAccelerator in
    Lightning's registry, DDP on sim ranks as ``strategy="ddp"`` (so also "auto" with
    several devices) and ``"ddp_sim"``, and Lightning's DeepSpeedStrategy on sim ranks (done by
    ``import harness_sim`` once Lightning is imported)."""
    from lightning.pytorch.accelerators import AcceleratorRegistry
    from lightning.pytorch.strategies import StrategyRegistry
    if SimAccelerator.name() not in AcceleratorRegistry:
        SimAccelerator.register_accelerators(AcceleratorRegistry)
    if SimDDPStrategy.strategy_name not in StrategyRegistry:
        SimDDPStrategy.register_strategies(StrategyRegistry)
    _deepspeed_on_sim()


# Lightning's profiler actions (trainer/call.py) that become phases, by the hook's name.
_HOOK_PHASES = {"training_step": "training_step", "backward": "backward",
                "optimizer_step": "optimizer_step", "optimizer_zero_grad": "zero_grad",
                "validation_step": "validation_step"}


class _PhaseProfiler:
    """Lightning's profiler as the Trainer had it, with the hooks above also harness phases.
    Lightning opens every hook in ``trainer.profiler.profile("[Strategy]X.training_step")``."""

    def __init__(self, profiler):
        self._profiler = profiler

    def __getattr__(self, name):
        return getattr(self._profiler, name)

    def profile(self, action_name: str):
        hook = action_name.rsplit(".", 1)[-1] if action_name.startswith("[") else None
        inner = self._profiler.profile(action_name)
        if hook not in _HOOK_PHASES:
            return inner
        return _Both(phase(_HOOK_PHASES[hook]), inner)


class _Both:
    def __init__(self, phase, inner):
        self.phase, self.inner = phase, inner

    def __enter__(self):
        self.inner.__enter__()
        self.phase.__enter__()

    def __exit__(self, *exc):
        self.phase.__exit__(*exc)
        return self.inner.__exit__(*exc)


class RunCallback(Callback):
    """What ``python -m harness_sim run`` adds to each Trainer (through Lightning's
    ``callbacks_factory`` entry point): Lightning's hooks as phases (training_step, backward,
    optimizer_step, zero_grad, validation_step, and ``validation`` around a validation run) and,
    with ``--steps-from lightning``, a step boundary at the end of every training batch."""

    def __init__(self, windows, lightning_steps: bool):
        self.windows = windows
        self.lightning_steps = lightning_steps
        self._validation: phase | None = None

    def setup(self, trainer, pl_module, stage) -> None:
        if not isinstance(trainer.profiler, _PhaseProfiler):
            trainer.profiler = _PhaseProfiler(trainer.profiler)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.lightning_steps:
            self.windows.boundary()

    def on_validation_start(self, trainer, pl_module) -> None:
        self._validation = phase("validation").__enter__()

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._validation is not None:
            self._validation.__exit__(None, None, None)
            self._validation = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.on_validation_end(trainer, pl_module)


register_accelerator()
