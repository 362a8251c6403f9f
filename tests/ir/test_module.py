"""IRModule and GlobalVar construction."""

import pytest

from mlckit.errors import IRError
from mlckit.ir import GlobalVar


def test_global_var_name_must_be_a_string():
    # A non-string name used to reach the VM's code generator and fail there with a TypeError.
    with pytest.raises(IRError, match="GlobalVar takes a string, got int"):
        GlobalVar(5)
    assert GlobalVar("main").name_hint == "main"
