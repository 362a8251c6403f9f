"""TVMScript of tensor intrinsics as the MLC course writes them (chapter "GPU and Specialized
Hardware", part 2): ``T.var``, ``T.match_buffer(..., offset_factor=, strides=)``,
``T.call_extern`` and ``buffer.access_ptr``, each printed and parsed back to an equal function."""

from __future__ import annotations

import pytest

from mlckit import tir
from mlckit.errors import IRError, MLCError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import tir as T
from mlckit.testing.examples import tmm16_desc, tmm16_impl


@pytest.mark.parametrize("func", [tmm16_desc, tmm16_impl], ids=["desc", "impl"])
def test_course_intrinsic_round_trips(func):
    text = func.script()
    reparsed = from_source(text)
    assert_structural_equal(reparsed, func)
    assert reparsed.script() == text


def test_impl_prints_as_the_course_writes_it():
    text = tmm16_impl.script()
    assert "sa, sb, sc = T.int32(), T.int32(), T.int32()" in text
    assert (
        'A = T.match_buffer(a, (16, 16), "float32", strides=(sa, 1), scope="global.A_reg", '
        "offset_factor=16)"
    ) in text
    assert (
        'T.call_extern("int32", "tmm16", C.access_ptr("w"), A.access_ptr("r"), '
        'B.access_ptr("r"), sa, sb, sc)'
    ) in text


def test_offset_factor_implies_an_elem_offset_variable():
    A = tmm16_desc.buffer_map[tmm16_desc.params[0]]
    assert A.offset_factor == 16
    assert isinstance(A.elem_offset, tir.Var) and A.elem_offset.name_hint == "A_elem_offset"
    assert "elem_offset" not in tmm16_desc.script()


def test_t_var_declares_a_symbolic_variable():
    @T.prim_func
    def f(a: T.handle):
        n = T.var("int64")
        A = T.match_buffer(a, (n,), "float32")
        for i in range(n):
            with T.block("b"):
                vi = T.axis.spatial(n, i)
                A[vi] = T.float32(0)

    n = f.buffer_map[f.params[0]].shape[0]
    assert isinstance(n, tir.Var) and n.dtype == "int64"
    assert_structural_equal(from_source(f.script()), f)


def test_access_ptr_builds_tvm_access_ptr():
    A = tir.decl_buffer((4, 8), "float32", "A")
    ptr = A.access_ptr("rw", offset=8)
    assert ptr.op.name == "tir.tvm_access_ptr" and ptr.dtype == "handle"
    data, offset, extent, mask = ptr.args
    assert data is A.data
    assert (offset.value, extent.value, mask.value) == (8, 24, 3)
    # With strides the default extent spans the outermost dimension.
    s = tir.Var("s", "int32")
    strided = tir.decl_buffer((4, 8), "float32", "S", strides=[s, 1])
    assert str(strided.access_ptr("r").args[2]) == str(4 * s)


def test_access_ptr_offsets_and_extents_round_trip():
    @T.prim_func
    def f(A: T.Buffer((4, 8), "float32"), n: T.int32):
        T.evaluate(T.call_extern("int32", "g", A.access_ptr("r", offset=n), A.access_ptr(3)))
        T.evaluate(T.call_extern("float32", "h", A.access_ptr("w", offset=8, extent=4)))

    text = f.script()
    assert 'A.access_ptr("r", offset=n)' in text
    assert 'A.access_ptr("rw")' in text
    assert 'A.access_ptr("w", offset=8, extent=4)' in text
    assert_structural_equal(from_source(text), f)


def test_call_extern_forms():
    x = tir.Var("x", "int32")
    new = T.call_extern("int32", "f", x)
    old = T.call_extern("f", x, dtype="int32")
    assert_structural_equal(new, old)
    assert new.args[0].value == "f" and new.dtype == "int32"
    with pytest.raises(IRError, match="the function name is an identifier"):
        tir.op.call_extern("int32", "not a name", x)


def test_bad_access_ptr_mode_is_a_clear_error():
    A = tir.decl_buffer((4,), "float32", "A")
    with pytest.raises(IRError, match="the access mask is 'r', 'w' or 'rw'"):
        A.access_ptr("x")
    with pytest.raises(IRError, match="only ptr_type='handle'"):
        A.access_ptr("r", content_lanes=4)


def test_register_extern():
    def twice(x):
        return 2 * x

    tir.op.register_extern("test_extern_script_twice", twice)
    assert tir.op.get_extern("test_extern_script_twice") is twice
    assert "test_extern_script_twice" in tir.op.list_externs()
    with pytest.raises(MLCError, match="registered already; pass override=True"):
        tir.op.register_extern("test_extern_script_twice")(lambda x: x)
    tir.op.register_extern("test_extern_script_twice", override=True)(twice)
