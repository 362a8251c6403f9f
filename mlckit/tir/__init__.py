"""TensorIR: the loop-level IR (expressions, buffers, statements, PrimFunc)."""

from mlckit.ir import assert_structural_equal, structural_equal

from . import analysis, op, stmt_functor
from .buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOpExpr,
    BufferLoad,
    Call,
    Cast,
    CmpExpr,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    IterVar,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Range,
    Select,
    SizeVar,
    StringImm,
    Sub,
    Var,
    const,
    convert,
    make_const,
)
from .function import PrimFunc
from .op import (
    ceil,
    erf,
    exp,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    max_value,
    min_value,
    sigmoid,
    sqrt,
    tanh,
)
from .stmt import (
    Allocate,
    AssertStmt,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

__all__ = [name for name in dir() if not name.startswith("_")]


def __getattr__(name: str):
    # The schedule needs mlckit.arith, which itself imports mlckit.tir's expressions: load it on
    # first use so that either package can be imported first.
    import importlib

    if name in ("schedule", "Schedule", "BlockRV", "LoopRV", "ScheduleError"):
        module = importlib.import_module("mlckit.tir.schedule")
        return module if name == "schedule" else getattr(module, name)
    if name == "transform":
        return importlib.import_module("mlckit.tir.transform")
    raise AttributeError(f"module 'mlckit.tir' has no attribute {name!r}")
