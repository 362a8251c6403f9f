"""Relax analyses (``relax.analysis.well_formed``, ``remove_all_unused``, ...)."""

from .analysis import get_var2val, name_to_binding, remove_all_unused
from .struct_info_analysis import (
    definable_tir_vars_in_struct_info,
    struct_info_lca,
    substitute_struct_info,
    tir_vars_in_struct_info,
)
from .well_formed import well_formed

__all__ = [
    "definable_tir_vars_in_struct_info",
    "get_var2val",
    "name_to_binding",
    "remove_all_unused",
    "struct_info_lca",
    "substitute_struct_info",
    "tir_vars_in_struct_info",
    "well_formed",
]
