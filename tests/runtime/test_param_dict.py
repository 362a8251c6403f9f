"""save_param_dict / load_param_dict / load_param_dict_from_file: named tensors as bytes and
back, any dtype and shape, bad bytes refused."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import mlckit
from mlckit.errors import SerializationError
from mlckit.runtime import (
    NDArray,
    load_param_dict,
    load_param_dict_from_file,
    save_param_dict,
)
from mlckit.runtime.archive import canonical_json, write_archive

PARAMS = {
    "half": np.arange(6, dtype="float16").reshape(2, 3),
    "weight/0": np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4),
    "double": np.array([np.pi, -np.inf, np.nan]),
    "count": np.array(7, "int32"),
    "steps": np.arange(-3, 3, dtype="int64"),
    "mask": np.array([[True, False]]),
    "nothing": np.zeros((0, 5), "float32"),
}


def test_every_dtype_and_shape_round_trips_in_order():
    loaded = load_param_dict(save_param_dict(PARAMS))
    assert list(loaded) == list(PARAMS)
    for name, value in PARAMS.items():
        assert isinstance(loaded[name], NDArray) and loaded[name].device == mlckit.cpu()
        got = loaded[name].numpy()
        assert got.dtype == value.dtype and got.shape == value.shape
        np.testing.assert_array_equal(got, value)


def test_ndarrays_and_views_are_saved_as_their_values(tmp_path):
    base = np.arange(24, dtype="float32").reshape(4, 6)
    params = {
        "nd": mlckit.nd.array(base),
        "view": base[::2, 1::2],
        "fortran": np.asfortranarray(base),
    }
    data = save_param_dict(params)
    assert save_param_dict(params) == data  # the same dict, the same bytes
    (tmp_path / "params.bin").write_bytes(data)
    loaded = load_param_dict_from_file(tmp_path / "params.bin")
    for name in params:
        expected = params[name].numpy() if name == "nd" else params[name]
        np.testing.assert_array_equal(loaded[name].numpy(), expected)


def test_the_header_names_format_version_and_tensors():
    with zipfile.ZipFile(io.BytesIO(save_param_dict({"b": np.zeros(2)}))) as z:
        header = json.loads(z.read("params.json"))
    assert header == {
        "format": "mlckit.params",
        "version": 1,
        "tensors": [{"name": "b", "file": "tensors/0.npy", "dtype": "float64", "shape": [2]}],
    }


def header_archive(header: dict, members: dict[str, bytes] | None = None) -> bytes:
    return write_archive([("params.json", canonical_json(header)), *(members or {}).items()])


GOOD = save_param_dict({"w": np.ones((2, 2), "float32")})


def flipped_tensor_byte() -> bytes:
    data = bytearray(GOOD)
    data[GOOD.index(b"\x93NUMPY") + 130] ^= 0xFF  # inside the stored tensor's values
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "is not an mlckit parameter file: it is not a zip archive"),
        (b"\x00" * 64, "is not an mlckit parameter file: it is not a zip archive"),
        (GOOD[: len(GOOD) // 2], "truncated or corrupted"),
        (flipped_tensor_byte(), "corrupted: member 'tensors/0.npy'"),
        (write_archive([("other.json", b"{}")]), "the zip archive has no params.json"),
        (write_archive([("params.json", b"{not json")]), "params.json is not JSON"),
        (header_archive({"format": "mlckit.library"}), "its format is 'mlckit.library'"),
        (
            header_archive({"format": "mlckit.params", "version": 2, "tensors": []}),
            "version 2; this mlckit reads version 1",
        ),
        (
            header_archive(
                {
                    "format": "mlckit.params",
                    "version": 1,
                    "tensors": [{"name": "w", "file": "t.npy", "dtype": "int32", "shape": [2]}],
                },
                {"t.npy": GOOD[-4:]},
            ),
            "tensor 'w' is not a valid .npy tensor",
        ),
        (
            header_archive(
                {
                    "format": "mlckit.params",
                    "version": 1,
                    "tensors": [{"name": "w", "file": "missing.npy"}],
                }
            ),
            "incomplete: it has no member 'missing.npy'",
        ),
    ],
)
def test_bad_bytes_are_refused(data, message):
    with pytest.raises(SerializationError, match=message):
        load_param_dict(data)


def test_a_tensor_unlike_its_header_is_refused():
    with zipfile.ZipFile(io.BytesIO(GOOD)) as z:
        tensor = z.read("tensors/0.npy")
    header = {
        "format": "mlckit.params",
        "version": 1,
        "tensors": [{"name": "w", "file": "t.npy", "dtype": "float64", "shape": [2, 2]}],
    }
    with pytest.raises(SerializationError, match="float32 tensor of shape .2, 2.*says float64"):
        load_param_dict(header_archive(header, {"t.npy": tensor}))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([np.zeros(2)], "takes a dict of names to tensors, not list"),
        ({1: np.zeros(2)}, "the name 1 is not a string"),
        ({"w": [1.0, 2.0]}, "'w' is list, not an NDArray or numpy array"),
        ({"w": np.array([object()])}, "'w' holds Python objects"),
    ],
)
def test_what_cannot_be_saved_is_refused(params, message):
    with pytest.raises(SerializationError, match=message):
        save_param_dict(params)


def test_what_is_not_bytes_or_not_a_file_is_refused(tmp_path):
    with pytest.raises(SerializationError, match="takes the bytes save_param_dict returned"):
        load_param_dict("params.bin")
    with pytest.raises(SerializationError, match="cannot read the parameter file"):
        load_param_dict_from_file(tmp_path / "missing.bin")
