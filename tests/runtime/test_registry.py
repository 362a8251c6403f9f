"""The global function registry and NDArray basics."""

import numpy as np
import pytest

import mlckit
from mlckit.errors import MLCError


def test_register_and_look_up():
    @mlckit.register_func("test.double", override=True)
    def double(x):
        return 2 * x

    assert mlckit.get_global_func("test.double")(3) == 6
    with pytest.raises(MLCError, match="already registered"):
        mlckit.register_func("test.double", lambda x: x)
    with pytest.raises(MLCError, match="did you mean 'test.double'"):
        mlckit.get_global_func("test.doubel")
    assert mlckit.get_global_func("test.missing", allow_missing=True) is None
    assert mlckit.register_global_func is mlckit.register_func


def test_ndarray_round_trips_numpy():
    data = np.arange(6, dtype="float32").reshape(2, 3)
    arr = mlckit.nd.array(data)
    assert arr.shape == (2, 3) and arr.dtype == "float32"
    out = arr.numpy()
    out[0, 0] = 100
    assert arr.numpy()[0, 0] == 0  # numpy() copies
    assert mlckit.runtime.tensor is mlckit.nd.array
