"""FashionMNIST images and the MLC course's pretrained weights, shipped in the repository.

The files live in the repository's top-level ``datasets/`` folder (``datasets/SOURCES.md`` says
where each one came from and gives its sha256). Set the environment variable ``MLCKIT_DATASETS``
to read them from another folder.

>>> from mlckit.datasets import fashion_mnist, mlp_params
>>> images, labels, class_names = fashion_mnist()   # uint8 (900, 28, 28), uint8 (900,)
>>> params = mlp_params()                           # w0 (128, 784), b0, w1 (10, 128), b1
>>> class_names[labels[0]]
'T-shirt/top'

Every file is checked against the sha256 that ``SOURCES.md`` gives before it is read, so a
damaged or replaced file is an error that names it, never silently different data. Where torch
is installed, :func:`torch_dataset` wraps the images the way ``torchvision.datasets.FashionMNIST``
with ``ToTensor()`` does, so the course's PyTorch code runs without a download.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from mlckit.errors import MLCError

__all__ = [
    "CLASS_NAMES",
    "DatasetError",
    "FashionMNIST",
    "cnn_params",
    "cnn_reference",
    "dataset_dir",
    "fashion_mnist",
    "fashion_mnist_split",
    "load_idx_labels",
    "mlp_params",
    "mlp_reference",
    "safe_load_pickle",
    "torch_dataset",
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
    """The checked path of a shipped file: it exists and its sha256 is the one SOURCES.md gives."""
    path = dataset_dir() / filename
    if not path.is_file():
        raise DatasetError(
            f"data file {filename!r} not found in {path.parent}. mlckit reads its data from the "
            "repository's datasets/ folder (install with `pip install -e .` from a clone), or "
            "from the folder named by the MLCKIT_DATASETS environment variable."
        )
    expected = _expected_sha256(path.parent).get(filename)
    if expected is None:
        raise DatasetError(f"{filename} has no sha256 in {path.parent / 'SOURCES.md'}")
    actual = _sha256(path)
    if actual != expected:
        raise DatasetError(
            f"{path} is corrupt or was replaced: its sha256 is {actual[:16]}..., SOURCES.md "
            f"says {expected[:16]}.... Restore it with `git checkout -- datasets/{filename}`."
        )
    return path


_SOURCES_ROW = re.compile(r"^\|\s*`([^`]+)`[^|]*\|\s*[\d,]+\s*\|\s*([0-9a-f]{64})\s*\|", re.M)


def _expected_sha256(directory: Path) -> dict[str, str]:
    sources = directory / "SOURCES.md"
    if not sources.is_file():
        raise DatasetError(f"{sources} is missing: it holds the checksums of the data files")
    return dict(_SOURCES_ROW.findall(sources.read_text(encoding="utf-8")))


# Hashing the ~4 MB of files once per process is cheap; a file changed since is hashed again.
_HASHES: dict[tuple[str, int, int], str] = {}


def _sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _HASHES:
        _HASHES[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _HASHES[key]


class FashionMNIST(NamedTuple):
    """Labelled images: ``images`` (N, 28, 28), ``labels`` (N,) uint8, the ten class names."""

    images: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]


Split = Literal["sprite900", "csv1000", "all"]


def fashion_mnist(split: Split = "sprite900", dtype: str = "uint8") -> FashionMNIST:
    """Real FashionMNIST images shipped with mlckit (nothing is downloaded).

    ``split``: ``"sprite900"`` (900 images, 90 per class in label order 0..9), ``"csv1000"``
    (1,000 images, shuffled) or ``"all"`` (both, 1,900). ``dtype="float32"`` gives pixels
    scaled to [0, 1], as ``torchvision.transforms.ToTensor`` does; ``"uint8"`` the raw 0..255.
    """
    if split == "all":
        parts = [fashion_mnist(name, dtype) for name in _IMAGE_SETS]
        return FashionMNIST(
            np.concatenate([p.images for p in parts]),
            np.concatenate([p.labels for p in parts]),
            CLASS_NAMES,
        )
    if split not in _IMAGE_SETS:
        raise DatasetError(
            f"unknown FashionMNIST split {split!r}; choose one of {[*_IMAGE_SETS, 'all']}"
        )
    if dtype not in ("uint8", "float32"):
        raise DatasetError(f"dtype must be 'uint8' or 'float32', not {dtype!r}")
    with np.load(_path(_IMAGE_SETS[split])) as data:
        images = np.ascontiguousarray(data["images"], dtype=np.uint8)
        labels = np.ascontiguousarray(data["labels"], dtype=np.uint8)
    if images.shape[1:] != (28, 28) or labels.shape != images.shape[:1]:
        raise DatasetError(
            f"{split}: expected images (N, 28, 28) and labels (N,), "
            f"got {images.shape} and {labels.shape}"
        )
    if dtype == "float32":
        images = images.astype(np.float32) / np.float32(255)
    return FashionMNIST(images, labels, CLASS_NAMES)


def fashion_mnist_split(
    train_size: int = 1500, test_size: int = 400, seed: int = 0, dtype: str = "float32"
) -> tuple[FashionMNIST, FashionMNIST]:
    """The 1,900 shipped images cut into a training set and a held-out set, each with the
    classes in the same proportions (stratified), the same cut for the same ``seed``."""
    from sklearn.model_selection import train_test_split

    every = fashion_mnist("all", dtype)
    if train_size + test_size > len(every.labels):
        raise DatasetError(
            f"{train_size} + {test_size} images asked for, but {len(every.labels)} are shipped"
        )
    train_images, test_images, train_labels, test_labels = train_test_split(
        every.images,
        every.labels,
        train_size=train_size,
        test_size=test_size,
        stratify=every.labels,
        random_state=seed,
    )
    return (
        FashionMNIST(train_images, train_labels, CLASS_NAMES),
        FashionMNIST(test_images, test_labels, CLASS_NAMES),
    )


def torch_dataset(split: Split = "sprite900") -> Any:
    """The images as a ``torch.utils.data.Dataset`` of ``(image (1, 28, 28) float32 in [0, 1],
    label int)``: what ``torchvision.datasets.FashionMNIST(..., transform=ToTensor())`` yields.

    >>> loader = torch.utils.data.DataLoader(torch_dataset("csv1000"), batch_size=1, shuffle=True)
    >>> image, label = next(iter(loader))   # (1, 1, 28, 28), (1,)
    """
    try:
        import torch
    except ImportError:
        raise DatasetError(
            "torch_dataset needs PyTorch: pip install -e '.[torch]' (or use fashion_mnist())"
        ) from None
    images, labels, _ = fashion_mnist(split, dtype="float32")
    return torch.utils.data.TensorDataset(
        torch.from_numpy(images[:, None]), torch.from_numpy(labels.astype(np.int64))
    )


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


def mlp_params() -> dict[str, np.ndarray]:
    """The MLC course's pretrained 2-layer MLP, float32, in PyTorch ``nn.Linear`` layout (out, in).

    ``w0`` (128, 784), ``b0`` (128,), ``w1`` (10, 128), ``b1`` (10,);
    ``logits = relu(x @ w0.T + b0) @ w1.T + b1`` with ``x = image.reshape(N, 784) / 255``.
    """
    with np.load(_path("fasionmnist_mlp_params.npz")) as data:
        return {key: np.ascontiguousarray(data[key], dtype=np.float32) for key in data.files}


def _unit_pixels(images: np.ndarray) -> np.ndarray:
    """Pixels as float32 in [0, 1]: uint8 images are scaled, float images taken as they are."""
    images = np.asarray(images)
    if images.dtype == np.uint8:
        return images.astype(np.float32) / np.float32(255)
    return images.astype(np.float32)


def mlp_reference(images: np.ndarray, params: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The MLP's logits computed with numpy: the answer a compiled model must reproduce."""
    p = mlp_params() if params is None else params
    x = _unit_pixels(images).reshape(len(images), -1)
    hidden = np.maximum(x @ p["w0"].T + p["b0"], np.float32(0))
    return hidden @ p["w1"].T + p["b1"]


def cnn_reference(images: np.ndarray, params: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The assignment CNN's logits (before softmax) computed with numpy, for (N, 28, 28) images."""
    p = cnn_params() if params is None else params
    x = _unit_pixels(images).reshape(len(images), 28, 28)
    n = len(x)
    # A 3x3 valid convolution of one input channel is a sum of 9 shifted, weighted images.
    out = np.zeros((n, 32, 26, 26), np.float32)
    for di in range(3):
        for dj in range(3):
            out += (
                p["conv2d_weight"][None, :, 0, di, dj, None, None]
                * x[:, None, di : di + 26, dj : dj + 26]
            )
    out = np.maximum(out + p["conv2d_bias"][None, :, None, None], np.float32(0))
    pooled = out.reshape(n, 32, 13, 2, 13, 2).max(axis=(3, 5)).reshape(n, -1)
    hidden = np.maximum(pooled @ p["linear0_weight"].T + p["linear0_bias"], np.float32(0))
    return hidden @ p["linear1_weight"].T + p["linear1_bias"]


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


def cnn_params() -> dict[str, np.ndarray]:
    """The MLC course's assignment CNN weights, float32.

    ``conv2d_weight`` (32, 1, 3, 3), ``conv2d_bias`` (32,), ``linear0_weight`` (100, 5408),
    ``linear0_bias`` (100,), ``linear1_weight`` (10, 100), ``linear1_bias`` (10,):
    conv3x3 (valid) -> relu -> maxpool 2x2 -> flatten (NCHW) -> linear -> relu -> linear.
    """
    params = safe_load_pickle(_path("fasionmnist_mlp_assignment_params.pkl"))
    if not isinstance(params, dict):
        raise DatasetError("the CNN parameter file does not hold a dict")
    return {str(k): np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}


def verify() -> dict[str, bool]:
    """Check each shipped file's sha256 against ``SOURCES.md``: ``{file name: matches}``.

    Files listed there but not shipped (the original CSV) are left out of the result.
    """
    directory = dataset_dir()
    return {
        filename: _sha256(directory / filename) == expected
        for filename, expected in _expected_sha256(directory).items()
        if (directory / filename).is_file()
    }
