"""Relax passes (``relax.transform.FuseOps()(mod)``), each a ``mlckit.ir.transform.Pass``."""

from .annotate_tir_op_pattern import AnnotateTIROpPattern
from .bind_params import BindParams, bind_params
from .call_tir_rewrite import CallTIRRewrite
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .fold_batchnorm_to_conv2d import FoldBatchnormToConv2D
from .fold_constant import FoldConstant
from .forward_gradient import ForwardGradient
from .fuse_ops import FuseOps
from .fuse_ops_by_pattern import FuseOpsByPattern, FusionError, FusionPattern, PatternCheckContext
from .fuse_tir import FuseTIR
from .fuse_transpose_matmul import FuseTransposeMatmul
from .gradient import Gradient
from .legalize_ops import LegalizeOps, register_legalize
from .meta_schedule import MetaScheduleApplyDatabase
from .static_plan_block_memory import StaticPlanBlockMemory, estimate_memory_usage
from .to_non_dataflow import ToNonDataflow

__all__ = [
    "AnnotateTIROpPattern",
    "BindParams",
    "CallTIRRewrite",
    "CanonicalizeBindings",
    "DeadCodeElimination",
    "FoldBatchnormToConv2D",
    "FoldConstant",
    "ForwardGradient",
    "FuseOps",
    "FuseOpsByPattern",
    "FuseTIR",
    "FuseTransposeMatmul",
    "FusionError",
    "FusionPattern",
    "Gradient",
    "LegalizeOps",
    "MetaScheduleApplyDatabase",
    "PatternCheckContext",
    "StaticPlanBlockMemory",
    "ToNonDataflow",
    "bind_params",
    "estimate_memory_usage",
    "register_legalize",
]
