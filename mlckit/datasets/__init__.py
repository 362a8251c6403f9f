"""FashionMNIST images and the MLC course's pretrained weights, shipped in the repository.

The files live in the repository's top-level ``datasets/`` folder (``datasets/SOURCES.md`` says
where each one came from and gives its sha256). Set the environment variable ``MLCKIT_DATASETS``
to read them from another folder.

>>> from mlckit.datasets import load_fashion_mnist, load_mlp_params, CLASS_NAMES
>>> images, labels = load_fashion_mnist()        # uint8 (900, 28, 28), uint8 (900,)
>>> params = load_mlp_params()                   # w0 (128, 784), b0, w1 (10, 128), b1
>>> CLASS_NAMES[labels[0]]
'T-shirt/top'
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mlckit.errors import MLCError

__all__ = [
    "CLASS_NAMES",
    "DatasetError",
    "dataset_dir",
    "load_cnn_params",
    "load_fashion_mnist",
    "load_idx_labels",
    "load_mlp_params",
    "mlp_reference",
    "safe_load_pickle",
    "verify",
]

# FashionMNIST's label order (zalandoresearch/fashion-mnist README).
CLASS_NAMES: tuple[str, ...] = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

_IMAGE_SETS = {
    # 90 images per class, cut from the FashionMNIST README's sprite, in label order.
    "sprite900": "fashion_mnist_sprite900.npz",
    # 1,000 shuffled images from a Kaggle-layout CSV (split unknown).
    "csv1000": "fashion_mnist_csv1000.npz",
}

_IDX_LABELS = {
    "test": "t10k-labels-idx1-ubyte.gz",
    "train": "train-labels-idx1-ubyte.gz",
}


class DatasetError(MLCError):
    """A shipped data file is missing, unreadable or not what it should be."""


def dataset_dir() -> Path:
    """The folder the data files are read from: ``$MLCKIT_DATASETS`` or the repo's ``datasets/``."""
    override = os.environ.get("MLCKIT_DATASETS")
    if override:
        return Path(override).expanduser()
    # mlckit/datasets/__init__.py -> parents[2] is the repository root (editable install).
    return Path(__file__).resolve().parents[2] / "datasets"


def _path(filename: str) -> Path:
    path = dataset_dir() / filename
    if not path.is_file():
        raise DatasetError(
            f"data file {filename!r} not found in {path.parent}. mlckit reads its data from the "
            "repository's datasets/ folder (install with `pip install -e .` from a clone), or "
            "from the folder named by the MLCKIT_DATASETS environment variable."
        )
    return path


def load_fashion_mnist(
    name: Literal["sprite900", "csv1000"] = "sprite900",
) -> tuple[np.ndarray, np.ndarray]:
    """Labelled FashionMNIST images: ``(images uint8 (N, 28, 28), labels uint8 (N,))``.

    ``"sprite900"``: 900 images, 90 per class in label order 0..9.
    ``"csv1000"``: 1,000 images in shuffled order.
    """
    if name not in _IMAGE_SETS:
        raise DatasetError(f"unknown image set {name!r}; choose one of {sorted(_IMAGE_SETS)}")
    with np.load(_path(_IMAGE_SETS[name])) as data:
        images = np.ascontiguousarray(data["images"], dtype=np.uint8)
        labels = np.ascontiguousarray(data["labels"], dtype=np.uint8)
    if images.shape[1:] != (28, 28) or labels.shape != images.shape[:1]:
        raise DatasetError(
            f"{name}: expected images (N, 28, 28) and labels (N,), "
            f"got {images.shape} and {labels.shape}"
        )
    return images, labels


def load_idx_labels(split: Literal["test", "train"] = "test") -> np.ndarray:
    """The official FashionMNIST label files (10,000 test / 60,000 train), uint8.

    Only the labels ship here; the matching image files do not (see datasets/SOURCES.md).
    """
    if split not in _IDX_LABELS:
        raise DatasetError(f"unknown split {split!r}; choose 'test' or 'train'")
    raw = gzip.decompress(_path(_IDX_LABELS[split]).read_bytes())
    # IDX header: magic 0x00000801 (unsigned byte, 1 dimension), then the count, big-endian.
    magic, count = int.from_bytes(raw[0:4], "big"), int.from_bytes(raw[4:8], "big")
    if magic != 0x801 or len(raw) != 8 + count:
        raise DatasetError(f"{_IDX_LABELS[split]} is not an IDX label file")
    return np.frombuffer(raw, dtype=np.uint8, offset=8).copy()


def load_mlp_params() -> dict[str, np.ndarray]:
    """The MLC course's pretrained 2-layer MLP, float32, in PyTorch ``nn.Linear`` layout (out, in).

    ``w0`` (128, 784), ``b0`` (128,), ``w1`` (10, 128), ``b1`` (10,);
    ``logits = relu(x @ w0.T + b0) @ w1.T + b1`` with ``x = image.reshape(N, 784) / 255``.
    """
    with np.load(_path("fasionmnist_mlp_params.npz")) as data:
        return {key: np.ascontiguousarray(data[key], dtype=np.float32) for key in data.files}


def mlp_reference(images: np.ndarray, params: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The MLP's logits computed with numpy: the answer a compiled model must reproduce."""
    p = load_mlp_params() if params is None else params
    x = images.reshape(len(images), -1).astype(np.float32) / np.float32(255)
    hidden = np.maximum(x @ p["w0"].T + p["b0"], np.float32(0))
    return hidden @ p["w1"].T + p["b1"]


# The only globals a pickled dict of numpy arrays needs. ``_reconstruct`` moved from
# numpy.core to numpy._core in numpy 2; take it from ndarray's own reduce protocol so that
# neither spelling has to be imported (numpy 2 warns on numpy.core).
_RECONSTRUCT = np.empty(0).__reduce__()[0]
_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    # A pickle can name any callable; refusing everything but numpy's array rebuilding makes
    # loading a downloaded weight file unable to run code.
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise DatasetError(
                f"refusing to unpickle {module}.{name}: only numpy arrays are allowed"
            ) from None


def safe_load_pickle(path: str | os.PathLike[str]) -> Any:
    """Unpickle a file that may hold only plain containers of numpy arrays (no code)."""
    with open(path, "rb") as f:
        try:
            return _NumpyOnlyUnpickler(f).load()
        except (pickle.UnpicklingError, EOFError) as err:
            raise DatasetError(f"{path}: not a readable pickle ({err})") from err


def load_cnn_params() -> dict[str, np.ndarray]:
    """The MLC course's assignment CNN weights, float32.

    ``conv2d_weight`` (32, 1, 3, 3), ``conv2d_bias`` (32,), ``linear0_weight`` (100, 5408),
    ``linear0_bias`` (100,), ``linear1_weight`` (10, 100), ``linear1_bias`` (10,):
    conv3x3 (valid) -> relu -> maxpool 2x2 -> flatten (NCHW) -> linear -> relu -> linear.
    """
    params = safe_load_pickle(_path("fasionmnist_mlp_assignment_params.pkl"))
    if not isinstance(params, dict):
        raise DatasetError("the CNN parameter file does not hold a dict")
    return {str(k): np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}


_SOURCES_ROW = re.compile(r"^\|\s*`([^`]+)`[^|]*\|\s*[\d,]+\s*\|\s*([0-9a-f]{64})\s*\|", re.M)


def verify() -> dict[str, bool]:
    """Check each shipped file's sha256 against ``SOURCES.md``: ``{file name: matches}``.

    Files listed there but not shipped (the original CSV) are left out of the result.
    """
    directory = dataset_dir()
    sources = (directory / "SOURCES.md").read_text(encoding="utf-8")
    result: dict[str, bool] = {}
    for filename, expected in _SOURCES_ROW.findall(sources):
        path = directory / filename
        if path.is_file():
            result[filename] = hashlib.sha256(path.read_bytes()).hexdigest() == expected
    return result
