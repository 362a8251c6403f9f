"""CanonicalizeBindings: variable-to-variable bindings disappear, outputs stay valid."""

from __future__ import annotations

import numpy as np

from mlckit import relax
from mlckit.ir import assert_structural_equal
from mlckit.relax.transform.canonicalize_bindings import CanonicalizeBindings
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


def test_chains_of_aliases_collapse():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            y = x
            z = y
            q = z
            return q

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            return x

    assert_structural_equal(CanonicalizeBindings()(Before), Expected)


def test_uses_read_the_original_variable():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            with R.dataflow():
                y = x
                z = R.add(y, R.const(1.0, "float32"))
                R.output(z)
            return z

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            with R.dataflow():
                z = R.add(x, R.const(1.0, "float32"))
                R.output(z)
            return z

    assert_structural_equal(CanonicalizeBindings()(Before), Expected)


def test_an_output_alias_of_a_dataflow_var_takes_over_its_binding():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            with R.dataflow():
                lv0 = R.add(x, x)
                lv1 = R.multiply(lv0, lv0)
                gv0 = lv0
                gv1 = lv1
                R.output(gv0, gv1)
            return (gv0, gv1)

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            with R.dataflow():
                gv0 = R.add(x, x)
                gv1 = R.multiply(gv0, gv0)
                R.output(gv0, gv1)
            return (gv0, gv1)

    after = CanonicalizeBindings()(Before)
    assert_structural_equal(after, Expected)
    assert relax.analysis.well_formed(after)


def test_trivial_match_cast_and_known_tuple_fields():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), "float32"), y: R.Tensor(("n",), "float32")):
            n = T.int64()
            with R.dataflow():
                a = R.match_cast(x, R.Tensor((4,), "float32"))
                m = R.match_cast(y, R.Tensor((n,), "float32"))
                t = (a, m)
                b = t[0]
                c = R.add(b, b)
                R.output(c)
            return c

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32"), y: R.Tensor(("n",), "float32")):
            with R.dataflow():
                t = (x, y)
                c = R.add(x, x)
                R.output(c)
            return c

    # t is left for DeadCodeElimination; the casts and the field look-up are gone.
    assert_structural_equal(CanonicalizeBindings()(Before), Expected)


def test_a_cast_that_defines_a_new_dim_is_kept():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("n",), "float32")):
            m = T.int64()
            y = R.match_cast(x, R.Tensor((m,), "float32"))
            return y

    assert_structural_equal(CanonicalizeBindings()(Before), Before)


@I.ir_module
class Kernels:
    @T.prim_func
    def exp(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = T.exp(X[vi])

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Kernels
        with R.dataflow():
            a = x
            lv = R.call_tir(cls.exp, (a,), out_sinfo=R.Tensor((4,), "float32"))
            gv = lv
            R.output(gv)
        out = gv
        return out


def test_numerics_are_unchanged():
    after = CanonicalizeBindings()(Kernels)
    bindings = [b for block in after["main"].body.blocks for b in block.bindings]
    assert len(bindings) == 1 and type(bindings[0].var) is relax.Var
    x = np.linspace(-1, 1, 4).astype("float32")
    for mod in (Kernels, after):
        vm = relax.VirtualMachine(relax.build(mod, "python"))
        np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(x), rtol=1e-6)
