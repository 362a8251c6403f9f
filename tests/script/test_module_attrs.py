"""I.module_attrs: written in a module's class body (where Python runs it before the parser
reads it), printed back with tensors as I.tensor, and refused anywhere else."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import runtime
from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal, structural_equal, structural_hash
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R


@I.ir_module
class WithAttrs:
    I.module_attrs({"param_num": 2, "state_num": 0, "name": "mlp"})

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        return x


def test_class_body_statement_sets_the_module_attributes():
    assert WithAttrs.attrs == {"param_num": 2, "state_num": 0, "name": "mlp"}
    assert 'I.module_attrs({"param_num": 2, "state_num": 0, "name": "mlp"})' in WithAttrs.script()
    assert_structural_equal(from_source(WithAttrs.script()), WithAttrs)


def test_tensor_attributes_print_and_compare_by_value():
    state = (runtime.tensor(np.zeros((), "int64")), runtime.tensor(np.arange(3.0)))
    mod = WithAttrs.with_attrs({"optim_state": state})
    text = mod.script()
    assert 'I.tensor("int64", (), ' in text and 'I.tensor("float64", (3,), ' in text
    back = from_source(text)
    assert_structural_equal(back, mod)
    assert structural_hash(back) == structural_hash(mod)
    changed = WithAttrs.with_attrs({"optim_state": (state[0], runtime.tensor(np.ones(3)))})
    assert not structural_equal(changed, mod)
    assert mod.without_attr("optim_state").attrs == WithAttrs.attrs


def test_outside_a_class_body_it_is_refused():
    with pytest.raises(MLCError, match="I.module_attrs can only be used in TVMScript"):
        I.module_attrs({"param_num": 1})
