"""The decorators check that relax code is well formed; from_source reads back what was printed."""

from __future__ import annotations

import pytest

from mlckit import relax
from mlckit.errors import WellFormedError
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R


def test_an_impure_call_in_a_dataflow_block_is_refused_where_it_is_defined():
    with pytest.raises(WellFormedError) as info:

        @I.ir_module
        class Impure:
            @R.function
            def main(x: R.Tensor((4,), "float32")):
                with R.dataflow():
                    y = R.call_packed("env.print", x, sinfo_args=R.Tensor((4,), "float32"))
                    R.output(y)
                return y

    message = str(info.value)
    assert "test_decorator_well_formed.py:" in message and "Impure" in message
    assert "check_well_formed=False" in message
    assert info.value.problems


def test_check_well_formed_false_builds_it_anyway():
    @I.ir_module(check_well_formed=False)
    class Impure:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            with R.dataflow():
                y = R.call_packed("env.print", x, sinfo_args=R.Tensor((4,), "float32"))
                R.output(y)
            return y

    assert not relax.analysis.well_formed(Impure)
    # What the printer writes reads back as it was printed.
    assert from_source(Impure.script()).script() == Impure.script()


def test_a_dim_defined_by_match_cast_is_erased_from_the_deduced_return():
    @R.function
    def f(s: R.Object):
        m = R.match_cast(s, R.Tensor(("m", 2), "float32"))
        return m

    assert f.ret_struct_info.ndim == 2 and f.ret_struct_info.shape is None
    assert relax.analysis.well_formed(f)
