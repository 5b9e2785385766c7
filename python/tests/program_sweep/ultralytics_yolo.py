"""Ultralytics' own command line, `yolo train`, on a YOLOv8n built from its packaged model config
(no weights), a detection dataset generated here in its format (images and label files, a data
YAML), AMP on, 64-pixel images, one epoch, an optimizer step a batch (nbs=4). Ours: the dataset and
the options.

    python ultralytics_yolo.py  (runs `yolo train ...` as the console script does)"""
import os
import random
import sys
import tempfile

from PIL import Image


def make_dataset(root: str, images: int = 24) -> str:
    rng = random.Random(0)
    for split in ("train", "val"):
        os.makedirs(f"{root}/images/{split}")
        os.makedirs(f"{root}/labels/{split}")
        for i in range(images):
            Image.new("RGB", (64, 64), tuple(rng.randrange(256) for _ in range(3))).save(
                f"{root}/images/{split}/{i}.jpg")
            with open(f"{root}/labels/{split}/{i}.txt", "w") as f:
                f.write(f"0 {rng.uniform(.3, .7):.3f} {rng.uniform(.3, .7):.3f} 0.2 0.2\n")
    with open(f"{root}/data.yaml", "w") as f:
        f.write(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: box\n")
    return f"{root}/data.yaml"


with tempfile.TemporaryDirectory() as scratch:
    data = make_dataset(scratch)
    device = "0" if __import__("torch").cuda.is_available() else "cpu"
    # the command line first: ultralytics.cfg reads sys.argv when it is imported
    sys.argv = ["yolo", "train", "model=yolov8n.yaml", f"data={data}", "epochs=1", "imgsz=64",
                "batch=4", "nbs=4", f"device={device}", "workers=0", "amp=True", "plots=False",
                f"project={scratch}/runs", "exist_ok=True", "verbose=False"]
    from ultralytics.cfg import entrypoint  # what the `yolo` console script runs
    entrypoint()
