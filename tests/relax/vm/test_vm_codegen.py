"""The VM codegen's op dispatch: the operators it runs itself, and the high-level rest."""

from __future__ import annotations

import pytest

from mlckit import relax
from mlckit.errors import BuildError
from mlckit.ir import Op
from mlckit.relax.vm.codegen import RelaxToPython
from mlckit.script import ir as I
from mlckit.script import relax as R


def test_every_operator_the_vm_runs_is_a_registered_op():
    assert set(RelaxToPython.OP_EMITTERS) <= set(Op.list_op_names())
    # None of them is high level: they have nothing to legalize.
    assert all(Op.get(name).get_attr("FLegalize") is None for name in RelaxToPython.OP_EMITTERS)


def test_a_high_level_operator_asks_for_legalization():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            y = R.exp(x)
            return y

    with pytest.raises(BuildError, match=r"`y = R.exp\(...\)` uses the high-level operator"):
        relax.build(Module, "python")
