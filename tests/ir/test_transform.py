"""Pass infrastructure: decorators, Sequential, PassContext filtering and instruments."""

import pytest

from mlckit.errors import MLCError
from mlckit.ir import IRModule, transform
from mlckit.tir import Evaluate, PrimFunc


def _module() -> IRModule:
    return IRModule({"f": PrimFunc([], Evaluate(0))})


@transform.module_pass(opt_level=0, name="AddAttr")
def add_attr(mod, ctx):
    mod["f"] = mod["f"].with_attr("seen", True)
    return mod


@transform.module_pass(opt_level=3)
class Rename:
    def __init__(self, new_name):
        self.new_name = new_name

    def transform_module(self, mod, ctx):
        func = mod["f"]
        mod.remove("f")
        mod[self.new_name] = func
        return mod


def test_function_decorator_gives_a_pass_that_leaves_its_input_alone():
    mod = _module()
    out = add_attr(mod)
    assert out["f"].attrs["seen"] is True
    assert "seen" not in mod["f"].attrs
    assert add_attr.info.name == "AddAttr" and add_attr.info.opt_level == 0


def test_class_decorator_passes_constructor_arguments():
    out = Rename("g")(_module())
    assert "g" in out and "f" not in out


def test_sequential_respects_opt_level_and_disabled_passes():
    seq = transform.Sequential([add_attr, Rename("g")])
    with transform.PassContext(opt_level=2):
        out = seq(_module())
    assert "f" in out and out["f"].attrs["seen"]
    with transform.PassContext(opt_level=3, disabled_pass=["AddAttr"]):
        out = seq(_module())
    assert "g" in out and "seen" not in out["g"].attrs
    with transform.PassContext(opt_level=0, required_pass=["Rename"]):
        assert "g" in seq(_module())


def test_instruments_see_every_pass():
    seen = []

    @transform.pass_instrument
    class Recorder:
        def run_before_pass(self, mod, info):
            seen.append(("before", info.name))

        def run_after_pass(self, mod, info):
            seen.append(("after", info.name))

    with transform.PassContext(opt_level=3, instruments=[Recorder()]):
        transform.Sequential([add_attr, Rename("g")], name="pipeline")(_module())
    assert seen == [
        ("before", "pipeline"),
        ("before", "AddAttr"),
        ("after", "AddAttr"),
        ("before", "Rename"),
        ("after", "Rename"),
        ("after", "pipeline"),
    ]


def test_bad_pass_definitions_are_reported():
    with pytest.raises(MLCError, match="opt_level"):
        transform.module_pass(name="x")(lambda mod, ctx: mod)
    with pytest.raises(MLCError, match="transform_module"):
        transform.module_pass(opt_level=0)(type("NoMethod", (), {}))

    @transform.module_pass(opt_level=0)
    def broken(mod, ctx):
        return None

    with pytest.raises(MLCError, match="returned NoneType"):
        broken(_module())


def test_tracer_records_each_pass_with_modules_and_time(capsys):
    from mlckit.ir.instrument import PassTimingInstrument, PassTracer, PrintAfterAll

    tracer, timing = PassTracer(), PassTimingInstrument()
    mod = _module()
    with transform.PassContext(opt_level=3, instruments=[tracer, timing, PrintAfterAll()]):
        out = transform.Sequential([add_attr, Rename("g")], name="pipeline")(mod)
    names = [r.name for r in tracer.records]
    assert names == ["AddAttr", "Rename", "pipeline"]
    leaves = tracer.leaf_records()
    assert [r.name for r in leaves] == ["AddAttr", "Rename"]
    assert leaves[0].before is mod and leaves[1].after is out
    assert leaves[0].changed and all(r.seconds >= 0 for r in leaves)
    assert "AddAttr" in timing.render()
    printed = capsys.readouterr().out
    assert "# After AddAttr" in printed and "def g(" in printed
