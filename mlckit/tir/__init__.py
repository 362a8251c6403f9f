"""TensorIR: the loop-level IR (expressions, buffers, statements, PrimFunc), its analyses, its
lowering passes (``tir.transform``) and its ``Schedule``.

The imports follow the layers: first the node classes (which ``mlckit.arith`` builds on), then
what is built on arith (analyses, transforms, the schedule).
"""

from mlckit.errors import ScheduleError
from mlckit.ir import assert_structural_equal, structural_equal

from . import op, stmt_functor
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

# What follows is built on mlckit.arith, which is built on the node classes above.
# isort: split
from . import analysis, schedule, transform
from .schedule import BlockRV, LoopRV, Schedule
from .tensor_intrin import TensorIntrin

__all__ = [name for name in dir() if not name.startswith("_")]
