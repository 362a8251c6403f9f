"""Relax analyses (``relax.analysis.well_formed``, ``remove_all_unused``, ...)."""

from .analysis import all_global_vars, get_var2val, name_to_binding, remove_all_unused, used_vars
from .struct_info_analysis import (
    definable_tir_vars_in_struct_info,
    struct_info_lca,
    substitute_struct_info,
    tir_vars_in_struct_info,
)
from .well_formed import well_formed

__all__ = [
    "all_global_vars",
    "definable_tir_vars_in_struct_info",
    "get_var2val",
    "name_to_binding",
    "remove_all_unused",
    "struct_info_lca",
    "substitute_struct_info",
    "tir_vars_in_struct_info",
    "used_vars",
    "well_formed",
]
