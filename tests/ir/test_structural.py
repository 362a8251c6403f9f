"""Structural equality and hashing: equal up to variable renaming, and nothing more."""

import numpy as np
import pytest

from mlckit import relax, tir
from mlckit.errors import MLCError, StructuralMismatchError
from mlckit.ir import IRModule, assert_structural_equal, structural_equal, structural_hash


def _sum_func(name_i: str, name_a: str):
    i = tir.Var(name_i, "int32")
    a = tir.decl_buffer((16,), "float32", name_a)
    b = tir.decl_buffer((16,), "float32", "B")
    body = tir.For(
        i, 0, 16, tir.ForKind.SERIAL, tir.BufferStore(b, a[i] + tir.FloatImm("float32", 1.0), [i])
    )
    return tir.PrimFunc([a.data, b.data], body, buffer_map={a.data: a, b.data: b})


def test_renaming_variables_keeps_equality_and_hash():
    f, g = _sum_func("i", "A"), _sum_func("k", "Input")
    assert structural_equal(f, g)
    assert structural_hash(f) == structural_hash(g)
    assert_structural_equal(f, g)


def test_swapping_uses_breaks_equality():
    x, y = tir.Var("x"), tir.Var("y")
    assert structural_equal(x - y, y - x) is True  # alpha-equivalent: first sight maps x<->y
    assert not structural_equal((x - y) + x, (x - y) + y)


def test_constants_and_dtypes_matter():
    i = tir.Var("i")
    assert not structural_equal(i + 1, i + 2)
    n32, n64 = tir.Var("n", "int32"), tir.Var("n", "int64")
    assert not structural_equal(n32 * 2, n64 * 2)
    assert structural_hash(i + 1) != structural_hash(i + 2)


def test_mismatch_message_points_at_the_differing_node():
    i = tir.Var("i")
    with pytest.raises(StructuralMismatchError) as info:
        assert_structural_equal(i * 4 + 1, i * 4 + 2)
    text = str(info.value)
    assert "root.b.value" in text
    assert "1 vs 2" in text
    # The enclosing node is printed as TVMScript.
    assert "i * 4 + 1" in text and "i * 4 + 2" in text
    assert isinstance(info.value, MLCError) and isinstance(info.value, AssertionError)


def test_relax_vars_compare_by_struct_info_not_name():
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 4), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((n, 4), "float32"))
    z = relax.Var("z", relax.TensorStructInfo((n, 4), "float16"))
    assert structural_equal(
        relax.Function([x], relax.SeqExpr([], x)), relax.Function([y], relax.SeqExpr([], y))
    )
    assert not structural_equal(
        relax.Function([x], relax.SeqExpr([], x)), relax.Function([z], relax.SeqExpr([], z))
    )


def test_constants_compare_by_value():
    a = relax.const(np.arange(6, dtype="float32").reshape(2, 3))
    b = relax.const(np.arange(6, dtype="float32").reshape(2, 3))
    c = relax.const(np.ones((2, 3), "float32"))
    assert structural_equal(a, b) and structural_hash(a) == structural_hash(b)
    assert not structural_equal(a, c)


def test_modules_compare_by_function_name():
    f = _sum_func("i", "A")
    m1 = IRModule({"add_one": f})
    m2 = IRModule({"add_one": _sum_func("j", "X")})
    m3 = IRModule({"other": _sum_func("j", "X")})
    assert structural_equal(m1, m2)
    assert not structural_equal(m1, m3)
    with pytest.raises(StructuralMismatchError, match="only left"):
        assert_structural_equal(m1, m3)


def test_module_is_dict_like():
    f = _sum_func("i", "A")
    mod = IRModule({"f": f})
    gv = mod.get_global_var("f")
    assert mod["f"] is f and mod[gv] is f
    assert [g.name_hint for g, _ in mod.functions.items()] == ["f"]
    mod["g"] = f
    assert "g" in mod and len(mod) == 2
    with pytest.raises(MLCError, match="no function named 'h'"):
        mod["h"]
    f2 = f.with_attr("global_symbol", "f")
    assert f2.attrs["global_symbol"] == "f" and "global_symbol" not in f.attrs
