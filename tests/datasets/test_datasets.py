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
    cnn_params,
    cnn_reference,
    dataset_dir,
    fashion_mnist,
    fashion_mnist_split,
    load_idx_labels,
    mlp_params,
    mlp_reference,
    safe_load_pickle,
    torch_dataset,
    verify,
)


@pytest.mark.parametrize(("name", "count"), [("sprite900", 900), ("csv1000", 1000)])
def test_image_sets_shapes_and_dtypes(name: str, count: int) -> None:
    images, labels, class_names = fashion_mnist(name)
    assert class_names == CLASS_NAMES
    assert images.shape == (count, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (count,) and labels.dtype == np.uint8
    assert set(np.unique(labels)) <= set(range(10))
    assert images.max() > 200  # real pixel data, not an empty array


def test_sprite900_is_in_label_order() -> None:
    labels = fashion_mnist("sprite900").labels
    np.testing.assert_array_equal(labels, np.repeat(np.arange(10), 90))


def test_class_names() -> None:
    assert len(CLASS_NAMES) == 10
    assert CLASS_NAMES[0] == "T-shirt/top" and CLASS_NAMES[9] == "Ankle boot"


def test_mlp_params_layout() -> None:
    params = mlp_params()
    shapes = {k: v.shape for k, v in params.items()}
    assert shapes == {"w0": (128, 784), "b0": (128,), "w1": (10, 128), "b1": (10,)}
    assert all(v.dtype == np.float32 for v in params.values())


@pytest.mark.parametrize(("name", "expected"), [("sprite900", 0.8856), ("csv1000", 0.867)])
def test_mlp_numpy_forward_accuracy(name: str, expected: float) -> None:
    images, labels, _ = fashion_mnist(name)
    accuracy = float((mlp_reference(images).argmax(axis=1) == labels).mean())
    assert accuracy > 0.85
    assert accuracy == pytest.approx(expected, abs=0.002)


def test_pickle_and_npz_mlp_params_agree() -> None:
    from_pickle = safe_load_pickle(dataset_dir() / "fasionmnist_mlp_params.pkl")
    from_npz = mlp_params()
    assert from_pickle.keys() == from_npz.keys()
    for key, value in from_npz.items():
        np.testing.assert_array_equal(from_pickle[key], value)


def test_cnn_params_forward_accuracy() -> None:
    params = cnn_params()
    assert params["conv2d_weight"].shape == (32, 1, 3, 3)
    assert params["linear0_weight"].shape == (100, 5408)
    images, labels, _ = fashion_mnist("sprite900")
    accuracy = float((cnn_reference(images, params).argmax(axis=1) == labels).mean())
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
        mlp_params()


def test_unknown_split_and_dtype() -> None:
    with pytest.raises(DatasetError, match="unknown FashionMNIST split 'mnist'.*sprite900"):
        fashion_mnist("mnist")  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="'uint8' or 'float32'"):
        fashion_mnist(dtype="float64")


def test_float_images_are_unit_pixels_and_give_the_same_predictions() -> None:
    raw = fashion_mnist("csv1000")
    scaled = fashion_mnist("csv1000", dtype="float32")
    assert scaled.images.dtype == np.float32
    assert scaled.images.min() >= 0.0 and scaled.images.max() == 1.0
    np.testing.assert_array_equal(scaled.images * 255, raw.images.astype(np.float32))
    np.testing.assert_allclose(mlp_reference(scaled.images), mlp_reference(raw.images), atol=1e-5)


def test_the_reference_mlp_is_accurate_on_all_shipped_images() -> None:
    images, labels, _ = fashion_mnist("all")
    assert images.shape == (1900, 28, 28) and labels.shape == (1900,)
    assert float((mlp_reference(images).argmax(axis=1) == labels).mean()) >= 0.85


def _copy_datasets(tmp_path: Path) -> Path:
    for path in dataset_dir().iterdir():
        if path.is_file():
            (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


def test_a_corrupt_file_is_named_with_how_to_restore_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _copy_datasets(tmp_path)
    damaged = bytearray((folder / "fashion_mnist_sprite900.npz").read_bytes())
    damaged[-100] ^= 0xFF
    (folder / "fashion_mnist_sprite900.npz").write_bytes(bytes(damaged))
    monkeypatch.setenv("MLCKIT_DATASETS", str(folder))
    with pytest.raises(DatasetError, match=r"fashion_mnist_sprite900.npz is corrupt.*git checkout"):
        fashion_mnist("sprite900")
    assert verify()["fashion_mnist_sprite900.npz"] is False
    assert fashion_mnist("csv1000").images.shape == (1000, 28, 28)  # the others still load


def test_a_missing_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy_datasets(tmp_path)
    (folder / "fasionmnist_mlp_assignment_params.pkl").unlink()
    monkeypatch.setenv("MLCKIT_DATASETS", str(folder))
    with pytest.raises(DatasetError, match="'fasionmnist_mlp_assignment_params.pkl' not found"):
        cnn_params()


def test_torch_dataset_yields_what_torchvision_to_tensor_does() -> None:
    torch = pytest.importorskip("torch")
    dataset = torch_dataset("csv1000")
    assert len(dataset) == 1000
    image, label = dataset[0]
    assert image.shape == (1, 28, 28) and image.dtype == torch.float32
    assert int(label) == int(fashion_mnist("csv1000").labels[0])
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True)
    images, labels = next(iter(loader))
    assert images.shape == (4, 1, 28, 28) and labels.shape == (4,)
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0


def test_fashion_mnist_split_is_stratified_disjoint_and_repeatable():
    train, test = fashion_mnist_split()
    assert train.images.shape == (1500, 28, 28) and test.images.shape == (400, 28, 28)
    assert train.images.dtype == np.float32
    # Each class is held out in its proportion of all 1,900 images.
    everything = np.bincount(fashion_mnist("all").labels)
    assert np.all(np.abs(np.bincount(test.labels) - 400 * everything / 1900) < 1)
    train_rows = {image.tobytes() for image in train.images}
    assert not any(image.tobytes() in train_rows for image in test.images)
    again, _ = fashion_mnist_split()
    assert np.array_equal(again.labels, train.labels)
    with pytest.raises(DatasetError, match=r"1500 \+ 401 images asked for, but 1900 are shipped"):
        fashion_mnist_split(1500, 401)
