"""The issue's example modules: parse, print, re-parse to an equal module; IR walks as in the course."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.ir import Op, assert_structural_equal, structural_hash
from mlckit.relax.analysis import well_formed
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import tir as T
from mlckit.testing.examples import Module, MyModule, MyModuleLegacy

EXAMPLES = {"Module": Module, "MyModule": MyModule, "MyModuleLegacy": MyModuleLegacy}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_print_parse_round_trip(name):
    mod = EXAMPLES[name]
    text = mod.script()
    reparsed = from_source(text)
    assert_structural_equal(reparsed, mod)
    assert structural_hash(reparsed) == structural_hash(mod)
    # Printing is deterministic, and the re-parsed module prints identically.
    assert reparsed.script() == text == mod.script()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_are_well_formed(name):
    assert well_formed(EXAMPLES[name])


def test_binding_struct_info_is_inferred_and_printed():
    text = Module.script()
    assert 'lv0: R.Tensor((n, 256), dtype="float32") = R.call_tir(cls.linear' in text
    assert 'lv2: R.Tensor((n, 10), dtype="float32")' in text
    assert "n = T.int64()" in text
    text = MyModule.script()
    assert 'lv0: R.Tensor((3, 4), dtype="float32") = R.multiply(x, y)' in text


def test_symbolic_n_is_one_variable_across_the_function():
    main = Module["main"]
    n_param = main.params[0].struct_info.shape.values[0]
    lv0 = main.body.blocks[0].bindings[0].var
    assert lv0.struct_info.shape.values[0] is n_param
    assert main.ret_struct_info.shape.values[0] is n_param


def test_walk_the_ir_as_in_the_course():
    func = MyModule["main"]
    assert isinstance(func, relax.Function)
    assert [p.name_hint for p in func.params] == ["x", "y"]
    assert isinstance(func.body, relax.SeqExpr)
    block = func.body.blocks[0]
    assert isinstance(block, relax.DataflowBlock)
    binding = block.bindings[0]
    assert isinstance(binding.var, relax.DataflowVar) and binding.var.name_hint == "lv0"
    assert isinstance(binding.value, relax.Call)
    assert binding.value.op == Op.get("relax.multiply")
    assert binding.value.args[0] is func.params[0]
    out = block.bindings[1].var
    assert isinstance(out, relax.Var) and not isinstance(out, relax.DataflowVar)
    assert func.body.body is out


def test_private_and_public_functions():
    assert Module["linear"].is_private
    assert not Module["main"].is_private and Module["main"].attrs["global_symbol"] == "main"
    assert MyModuleLegacy["relu0"].attrs["global_symbol"] == "relu0"
    assert "@T.prim_func(private=True)" in Module.script()
    assert "global_symbol" not in Module.script()


def test_root_block_holds_function_level_allocations():
    body = Module["linear"].body
    assert isinstance(body, tir.BlockRealize) and body.block.name_hint == "root"
    assert [b.name for b in body.block.alloc_buffers] == ["Y"]


def test_inferred_regions_equal_explicit_ones():
    @T.prim_func
    def implicit(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    @T.prim_func
    def explicit(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    assert_structural_equal(
        implicit.with_attr("global_symbol", "f"), explicit.with_attr("global_symbol", "f")
    )


def test_constants_round_trip_through_metadata():
    weight = np.arange(12, dtype="float32").reshape(3, 4)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(relax.op.matmul(x, relax.const(weight)))
            gv = bb.emit_output(relax.op.add(lv, relax.const(1.0, "float32")))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script(show_meta=True)
    assert 'metadata["relax.expr.Constant"][0]' in text
    assert 'R.const(1.0, "float32")' in text
    assert_structural_equal(from_source(text), mod)
    assert "Metadata omitted" in mod.script()


def test_import_mlckit_as_tvm_spelling():
    tvm = mlckit
    assert tvm.script.ir_module is I.ir_module
    assert tvm.ir.Op.get("relax.add") is Op.get("relax.add")


def test_functions_named_like_script_names_round_trip():
    # A function named `metadata` (or T, range, ...) used to shadow the metadata section (or
    # the namespace) when the printed module was parsed again.
    weight = relax.const(np.arange(6, dtype="float32").reshape(2, 3))
    mod = mlckit.ir.IRModule()
    for name in ("metadata", "T", "range"):
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
        with bb.function(name, [x]):
            bb.emit_func_output(bb.emit(relax.op.add(x, weight)))
        mod[name] = bb.get()[name]
    assert_structural_equal(from_source(mod.script(show_meta=True)), mod)


def test_size_vars_round_trip():
    n = tir.SizeVar("n", "int64")
    a = tir.Var("a", "handle")
    buffer = tir.decl_buffer((n,), "float32", "A")
    body = tir.BufferStore(buffer, tir.FloatImm("float32", 1.0), [tir.IntImm("int64", 0)])
    func = tir.PrimFunc([a], body, buffer_map={a: buffer})
    text = func.script()
    assert "n = T.int64(is_size_var=True)" in text
    again = from_source(text)
    assert_structural_equal(again, func)
    assert isinstance(again.buffer_map[again.params[0]].shape[0], tir.SizeVar)


def test_prim_struct_info_value_takes_its_dtype():
    # R.Prim("int64", 1) held an int32 value under an int64 dtype, and printed as an int32.
    func = from_source(
        '@R.function\ndef f(p: R.Prim("int64", 1)) -> R.Prim("int64"):\n    return p\n'
    )
    assert func.params[0].struct_info.value.dtype == "int64"
    assert_structural_equal(from_source(func.script()), func)


def test_a_function_used_as_a_value_round_trips():
    # `return main` binds the GlobalVar; it printed as `gv: R.Callable(...) = cls.main`, which
    # did not parse back.
    mod = from_source(
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(x: R.Tensor((3,), "float32")):\n        return main\n'
    )
    text = mod.script()
    assert "= cls.main" in text
    assert_structural_equal(from_source(text), mod)
