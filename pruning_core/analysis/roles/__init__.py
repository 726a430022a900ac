"""Head roles: what each attention head does (previous token, induction, retrieval, ...), as a score per
head with a threshold, computed on named probe inputs; and which role heads a mask removes or protects.

    from pruning_core.analysis.roles import compute_roles
    report = compute_roles(loaded)              # RoleReport
    report.heads("induction")                   # [(kind, layer, head), ...]

Modules, top to bottom: :mod:`.base` (the Role extension point and its registry), :mod:`.probes` (probe
inputs and their maps), :mod:`.patterns`, :mod:`.needle` (retrieval), :mod:`.alignment` (speech),
:mod:`.report` (``RoleReport`` and ``headprune.roles/1``), :mod:`.compute` (``compute_roles``),
:mod:`.summary` (protection and "removes 3 of 4 induction heads"), :mod:`.checks` (behavioural checks: the
loss on a repeated sequence's second copy, random heads as the baseline).
"""
from __future__ import annotations

from pruning_core.analysis.roles import patterns  # noqa: F401,I001  (registers the pattern roles first: the order tables list them)
from pruning_core.analysis.roles import needle  # noqa: F401,E402  (registers retrieval)
from pruning_core.analysis.roles import alignment  # noqa: F401,E402  (registers alignment: speech models)
from pruning_core.analysis.roles.base import ROLES, Role, get_role, parse_roles, role_names
from pruning_core.analysis.roles.checks import (
    CopyLosses,
    InductionCheck,
    copy_losses,
    induction_check,
    random_heads,
)
from pruning_core.analysis.roles.compute import compute_roles
from pruning_core.analysis.roles.needle import NeedlePrompt, needle_accuracy, needle_prompts
from pruning_core.analysis.roles.report import ROLES_FORMAT, RoleReport, load_roles
from pruning_core.analysis.roles.summary import RoleRemoval, protected_heads, removal_summary, role_removals

__all__ = ["ROLES", "ROLES_FORMAT", "CopyLosses", "InductionCheck", "NeedlePrompt", "Role", "RoleReport", "compute_roles",
           "copy_losses", "get_role", "induction_check", "load_roles", "needle_accuracy", "needle_prompts", "parse_roles",
           "protected_heads", "random_heads", "removal_summary", "role_names", "role_removals", "RoleRemoval"]
