"""torch.sim, the device module: what torch's own serialization, autocast, RNG forking and
device-generic code call on it, run through those torch functions themselves."""
from __future__ import annotations

import io

import pytest
import torch

import harness_sim


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def _state():
    model = torch.nn.Linear(4, 3).to("sim:1")
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4, device="sim:1")).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optim": opt.state_dict(), "plain": torch.arange(5.0)}


def _assert_same(loaded, original, device_of):
    """Every tensor equal to the original's, on the device ``device_of(original tensor)``."""
    if isinstance(original, torch.Tensor):
        assert loaded.device == device_of(original), (loaded.device, original.device)
        assert torch.equal(loaded.cpu(), original.cpu())
    elif isinstance(original, dict):
        assert loaded.keys() == original.keys()
        for key in original:
            _assert_same(loaded[key], original[key], device_of)
    elif isinstance(original, (list, tuple)):
        for a, b in zip(loaded, original):
            _assert_same(a, b, device_of)
    else:
        assert loaded == original


def test_save_and_load_round_trip_without_map_location():
    state = _state()
    loaded = torch.load(_saved(state))
    _assert_same(loaded, state, lambda t: t.device)  # each storage back on its own device
    assert loaded["model"]["weight"].device == torch.device("sim", 1)
    assert loaded["optim"]["state"][0]["step"].device.type == "cpu"  # Adam's step stays a CPU scalar


SIM2 = torch.device("sim", 2)
CPU = torch.device("cpu")


@pytest.mark.parametrize("where, device_of", [
    ("sim:2", lambda t: SIM2),                 # everything onto sim:2, CPU tensors included
    (SIM2, lambda t: SIM2),
    ("cpu", lambda t: CPU),
    ({"sim:1": "sim:2"}, lambda t: SIM2 if t.device.type == "sim" else t.device),
    (lambda storage, location: storage, lambda t: CPU),  # the storage as read: host memory
], ids=["str", "device", "cpu", "dict", "callable"])
def test_load_with_map_location(where, device_of):
    state = _state()
    _assert_same(torch.load(_saved(state), map_location=where), state, device_of)


def test_a_host_checkpoint_loads_onto_sim_as_one_h2d_and_sync_per_storage():
    state = {"a": torch.randn(3, 4), "b": torch.arange(6)}
    buffer = _saved(state)
    with harness_sim.count() as c:
        loaded = torch.load(buffer, map_location="sim:0")
    _assert_same(loaded, state, lambda t: torch.device("sim", 0))
    # torch/_utils.py _to: with torch.sim.device(...): UntypedStorage(..., device).copy_(host),
    # a blocking copy from pageable memory: on CUDA a copy and a host sync, each storage.
    assert c.copies["h2d"]["count"] == 2 and c.syncs == 2
    assert c.copies["h2d"]["bytes"] == 3 * 4 * 4 + 6 * 8


def test_current_device_is_the_device_guards():
    assert torch.sim.current_device() == 0
    with torch.sim.device(3):
        assert torch.sim.current_device() == 3
        assert torch.accelerator.current_device_index() == 3
        assert torch.empty(2, device="sim").device == torch.device("sim", 3)
        with torch.sim.device_of(torch.ones(1, device="sim:5")):
            assert torch.sim.current_device() == 5
        assert torch.sim.current_device() == 3
    assert torch.sim.current_device() == 0
    torch.sim.set_device("sim:2")
    try:
        assert torch.accelerator.current_device_index() == 2
    finally:
        torch.sim.set_device(0)
    with pytest.raises(ValueError, match="out of range"):
        torch.sim.set_device(8)
    assert torch.sim._utils._get_device_index("sim:4") == 4
    assert torch.sim._utils._get_device_index(None, optional=True) == 0


def test_torch_functions_that_take_a_device_module():
    assert torch.get_device_module("sim") is torch.sim
    # torch.random.fork_rng forks the device's RNG through the module (sim ops use the CPU's)
    with torch.random.fork_rng(devices=[0], device_type="sim"):
        torch.sim.manual_seed(1)
        a = torch.randn(3, device="sim")
    torch.sim.manual_seed(1)
    assert torch.equal(a.cpu(), torch.randn(3, device="sim").cpu())
    # autocast asks the module for the dtypes it supports
    with torch.autocast("sim", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("sim")
    # streams and events are torch's generic ones
    s = torch.sim.current_stream()
    assert s.device == torch.device("sim", 0)
    with torch.sim.stream(s):
        e = torch.sim.Event()
        e.record()
    assert torch.sim.memory_stats()["allocated_bytes.all.current"] == torch.sim.memory_allocated()


def test_memory_reserved_is_what_cudas_caching_allocator_would_reserve():
    """torch.cuda.memory_reserved's rules (CUDACachingAllocator.cpp, default configuration): small
    requests share a 2 MiB segment, a 1-10 MiB request takes a 20 MiB one, freed blocks stay
    reserved until empty_cache; memory_allocated counts a large request's whole block when too
    little of it was left to split off. sim:6, which no other test here uses."""
    mib = 1 << 20
    with torch.sim.device(6):
        torch.sim.empty_cache()
        start = torch.sim.memory_reserved(6)
        small = torch.empty(250, device="sim:6")            # 1,000 bytes
        large = torch.empty(mib, device="sim:6")            # 4 MiB
        assert torch.sim.memory_reserved(6) - start == 22 * mib
        del small, large
        assert torch.sim.memory_reserved(6) - start == 22 * mib  # cached
        assert torch.sim.memory_stats(6)["reserved_bytes.all.current"] - start == 22 * mib
        torch.sim.empty_cache()
        assert torch.sim.memory_reserved(6) == start
        before = torch.sim.memory_allocated(6)
        unsplit = torch.empty(11 * mib + 512, dtype=torch.uint8, device="sim:6")
        assert torch.sim.memory_allocated(6) - before == 12 * mib  # the whole 12 MiB block
        del unsplit
        assert torch.sim.max_memory_reserved(6) >= 22 * mib
