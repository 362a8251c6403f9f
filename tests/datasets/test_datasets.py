"""The shipped FashionMNIST data and pretrained weights load as documented in SOURCES.md."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from mlckit.datasets import (
    CLASS_NAMES,
    DatasetError,
    dataset_dir,
    load_cnn_params,
    load_fashion_mnist,
    load_idx_labels,
    load_mlp_params,
    mlp_reference,
    safe_load_pickle,
    verify,
)


@pytest.mark.parametrize(("name", "count"), [("sprite900", 900), ("csv1000", 1000)])
def test_image_sets_shapes_and_dtypes(name: str, count: int) -> None:
    images, labels = load_fashion_mnist(name)
    assert images.shape == (count, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (count,) and labels.dtype == np.uint8
    assert set(np.unique(labels)) <= set(range(10))
    assert images.max() > 200  # real pixel data, not an empty array


def test_sprite900_is_in_label_order() -> None:
    _, labels = load_fashion_mnist("sprite900")
    np.testing.assert_array_equal(labels, np.repeat(np.arange(10), 90))


def test_class_names() -> None:
    assert len(CLASS_NAMES) == 10
    assert CLASS_NAMES[0] == "T-shirt/top" and CLASS_NAMES[9] == "Ankle boot"


def test_mlp_params_layout() -> None:
    params = load_mlp_params()
    shapes = {k: v.shape for k, v in params.items()}
    assert shapes == {"w0": (128, 784), "b0": (128,), "w1": (10, 128), "b1": (10,)}
    assert all(v.dtype == np.float32 for v in params.values())


@pytest.mark.parametrize(("name", "expected"), [("sprite900", 0.8856), ("csv1000", 0.867)])
def test_mlp_numpy_forward_accuracy(name: str, expected: float) -> None:
    images, labels = load_fashion_mnist(name)
    accuracy = float((mlp_reference(images).argmax(axis=1) == labels).mean())
    assert accuracy > 0.85
    assert accuracy == pytest.approx(expected, abs=0.002)


def test_pickle_and_npz_mlp_params_agree() -> None:
    from_pickle = safe_load_pickle(dataset_dir() / "fasionmnist_mlp_params.pkl")
    from_npz = load_mlp_params()
    assert from_pickle.keys() == from_npz.keys()
    for key, value in from_npz.items():
        np.testing.assert_array_equal(from_pickle[key], value)


def _cnn_forward(images: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    x = images.astype(np.float32)[:, None] / np.float32(255)  # (N, 1, 28, 28)
    n = len(x)
    # 3x3 valid convolution as a sum of 9 shifted products.
    out = np.zeros((n, 32, 26, 26), np.float32)
    for di in range(3):
        for dj in range(3):
            patch = x[:, 0, di : di + 26, dj : dj + 26]
            out += p["conv2d_weight"][None, :, 0, di, dj, None, None] * patch[:, None]
    out = np.maximum(out + p["conv2d_bias"][None, :, None, None], 0)
    pooled = out.reshape(n, 32, 13, 2, 13, 2).max(axis=(3, 5)).reshape(n, -1)
    hidden = np.maximum(pooled @ p["linear0_weight"].T + p["linear0_bias"], 0)
    return hidden @ p["linear1_weight"].T + p["linear1_bias"]


def test_cnn_params_forward_accuracy() -> None:
    params = load_cnn_params()
    assert params["conv2d_weight"].shape == (32, 1, 3, 3)
    assert params["linear0_weight"].shape == (100, 5408)
    images, labels = load_fashion_mnist("sprite900")
    accuracy = float((_cnn_forward(images, params).argmax(axis=1) == labels).mean())
    assert accuracy == pytest.approx(0.854, abs=0.005)


class _Evil:
    def __reduce__(self):  # a pickle that would call os.system when loaded unsafely
        return (os.system, ("echo pwned",))


def test_safe_load_pickle_refuses_code(tmp_path: Path) -> None:
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"w": _Evil()}))
    with pytest.raises(DatasetError, match="refusing to unpickle"):
        safe_load_pickle(path)


def test_idx_labels() -> None:
    test = load_idx_labels("test")
    assert test.shape == (10000,)
    np.testing.assert_array_equal(np.bincount(test), np.full(10, 1000))
    assert load_idx_labels("train").shape == (60000,)


def test_shipped_files_match_sources_md() -> None:
    checks = verify()
    assert len(checks) == 8
    assert all(checks.values()), checks


def test_env_override_and_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLCKIT_DATASETS", str(tmp_path))
    assert dataset_dir() == tmp_path
    with pytest.raises(DatasetError, match="MLCKIT_DATASETS"):
        load_mlp_params()


def test_unknown_image_set() -> None:
    with pytest.raises(DatasetError, match="sprite900"):
        load_fashion_mnist("mnist")  # type: ignore[arg-type]
