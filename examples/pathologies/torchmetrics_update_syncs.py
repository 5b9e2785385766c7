"""torchmetrics' update() reads tensors back to the host by default; validate_args=False drops most.

Which update()/forward() calls of torchmetrics (as installed; 1.9.0 here) read back to the host, per
metric class, on CUDA tensors (Lightning-AI/torchmetrics #1899: metrics that sync while running).
Classification metrics validate their inputs in update() by default (validate_args=True): the
binary ones call torch.unique on the target and .item() on a range check
(_binary_stat_scores_tensor_validation); the multiclass ones count classes with torch.bincount,
which on CUDA reads the input's min and max back (torchmetrics/utilities/data.py, _bincount)
whatever validate_args says. forward() also computes the batch's value, and several compute
functions read back (.item() in R2Score's and PearsonCorrCoef's, a boolean-mask index).

The two variants are a training step that updates five common classification metrics: with their
defaults, and with validate_args=False; the table after them is every listed class, update and
forward, both ways. The tensors are CUDA's: the program runs itself under
`python -m harness_sim run --as-cuda` (on sim's own device type three classes' forward counts
differ: a library's CPU-or-CUDA branch takes the other side)."""
import argparse
import os
import sys

if os.environ.get("HARNESS_SIM_AS_CUDA") != "device":  # not yet under run --as-cuda
    os.execv(sys.executable, [sys.executable, "-m", "harness_sim", "run", "--as-cuda", "--quiet",
                              "--", os.path.abspath(__file__), *sys.argv[1:]])
import torch  # noqa: E402

import harness_sim  # noqa: E402
from torchmetrics import classification as C, regression as R  # noqa: E402

STEPS = 10
N, K = 64, 5
DEVICE = torch.device("cuda", 0)  # sim, serving CUDA


def multiclass():
    return torch.randn(N, K, device=DEVICE).softmax(-1), torch.randint(0, K, (N,), device=DEVICE)


def binary():
    return torch.rand(N, device=DEVICE), torch.randint(0, 2, (N,), device=DEVICE)


def regression():
    return torch.randn(N, device=DEVICE), torch.randn(N, device=DEVICE)


# name, metric(**validate), data; regression metrics take no validate_args.
CLASSES = [
    ("BinaryAccuracy", lambda **v: C.BinaryAccuracy(**v), binary),
    ("BinaryF1Score", lambda **v: C.BinaryF1Score(**v), binary),
    ("BinaryAUROC", lambda **v: C.BinaryAUROC(**v), binary),
    ("BinaryAveragePrecision", lambda **v: C.BinaryAveragePrecision(**v), binary),
    ("MulticlassAccuracy", lambda **v: C.MulticlassAccuracy(num_classes=K, **v), multiclass),
    ("MulticlassF1Score", lambda **v: C.MulticlassF1Score(num_classes=K, **v), multiclass),
    ("MulticlassConfusionMatrix", lambda **v: C.MulticlassConfusionMatrix(num_classes=K, **v),
     multiclass),
    ("MulticlassAUROC", lambda **v: C.MulticlassAUROC(num_classes=K, **v), multiclass),
    ("MeanSquaredError", lambda **v: R.MeanSquaredError(), regression),
    ("MeanAbsoluteError", lambda **v: R.MeanAbsoluteError(), regression),
    ("R2Score", lambda **v: R.R2Score(), regression),
    ("PearsonCorrCoef", lambda **v: R.PearsonCorrCoef(), regression),
    ("ExplainedVariance", lambda **v: R.ExplainedVariance(), regression),
]
BANK = ("BinaryAccuracy", "BinaryF1Score", "BinaryAveragePrecision", "MulticlassAccuracy",
        "MulticlassF1Score")


def training_step_updates(validate: bool) -> harness_sim.Counts:
    """STEPS steps, each updating the bank of classification metrics with a new batch."""
    torch.manual_seed(0)
    made = {name: (make(validate_args=validate).to(DEVICE), data)
            for name, make, data in CLASSES if name in BANK}
    batches = [{name: data() for name, (_, data) in made.items()} for _ in range(STEPS + 1)]
    for name, (metric, _) in made.items():  # warm-up: lazy state
        metric.update(*batches[0][name])
    with harness_sim.count() as c:
        for batch in batches[1:]:
            with c.step():
                for name, (metric, _) in made.items():
                    metric.update(*batch[name])
    return c


def syncs_of_one_call(make, data, validate: bool, call: str) -> int:
    torch.manual_seed(0)
    metric = make(validate_args=validate).to(DEVICE)
    preds, target = data()
    metric.update(preds, target)  # warm-up
    with harness_sim.count() as c:
        (metric.update if call == "update" else metric)(preds, target)
    return c.syncs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="write a schema-v1 report of both variants here")
    args = parser.parse_args()
    counted = {"validate_args_default": training_step_updates(True),
               "validate_args_false": training_step_updates(False)}
    print(__doc__.strip().splitlines()[0])
    print(f"  {'variant':<24} {'sync/step':>9} {'D2H/step':>8}  (a step: update() of {len(BANK)} "
          "metrics)")
    for name, c in counted.items():
        print(f"  {name:<24} {c.per_step('syncs'):>9g} {c.per_step('d2h'):>8g}")
        for site in c.sync_sites:
            print(f"      {site}")
    print(f"  syncs of one call          {'update':>5} {'forward':>8} | validate_args=False: "
          f"{'update':>6} {'forward':>7}")
    for name, make, data in CLASSES:
        row = [syncs_of_one_call(make, data, v, call) for v in (True, False)
               for call in ("update", "forward")]
        print(f"  {name:<26} {row[0]:>5} {row[1]:>8} | {'':>20}{row[2]:>6} {row[3]:>7}")
    if args.out:
        harness_sim.write_report(args.out, counted, scenario="pathology_torchmetrics_update",
                                 description=__doc__.strip().splitlines()[0],
                                 measured_window=f"{STEPS} steps, each updating "
                                 f"{len(BANK)} classification metrics, after one warm-up update")
    return 0


if __name__ == "__main__":
    sys.exit(main())
