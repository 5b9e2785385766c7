"""Keras 3 on its torch backend: Model.fit (its own training loop, compiled with an optimizer and
metrics) on generated arrays; Keras puts its tensors on CUDA when torch has it. Ours: the model's
sizes, the data."""
import os

os.environ.setdefault("KERAS_BACKEND", "torch")
import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(0)
x = rng.standard_normal((96, 32)).astype("float32")
y = rng.integers(0, 4, size=(96,))
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(4)])
model.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
print(f"keras {keras.__version__} on {keras.backend.backend()}: loss {history.history['loss'][-1]:.4f}")
