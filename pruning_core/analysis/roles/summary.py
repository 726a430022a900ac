"""Roles and masks: which heads a set of roles protects, and which role heads a mask removes.

The text is written here once, so the CLI, the report and the dashboard say it the same way:
``"removes 3 of 4 induction heads, 0 of 9 retrieval heads"``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pruning_core.core.heads import HeadId, HeadMask
from pruning_core.analysis.roles.base import get_role
from pruning_core.analysis.roles.report import RoleReport


def protected_heads(report: RoleReport, roles: Sequence[str]) -> frozenset[HeadId]:
    """Every head that has one of ``roles`` in ``report`` (score above the role's threshold)."""
    for r in roles:
        get_role(r)                                        # unknown names raise with the list
    return frozenset(h for r in roles if r in report.scores for h in report.heads(r))


@dataclass(frozen=True)
class RoleRemoval:
    """How many of a role's heads a mask removes."""

    role: str
    removed: int
    detected: int

    def text(self) -> str:
        title = get_role(self.role).short_title
        return f"{self.removed} of {self.detected} {title} head{'s' if self.detected != 1 else ''}"


def role_removals(report: RoleReport, mask: HeadMask, roles: Sequence[str] | None = None) -> list[RoleRemoval]:
    """For each role of ``roles`` (default: every role in the report with at least one head), the heads of
    that role the mask removes (0 = removed) out of those detected."""
    mask.check_fits(report.layout)
    gone = set(mask.removed())
    names = list(roles) if roles is not None else [r for r in report.scores if report.heads(r)]
    return [RoleRemoval(r, sum(h in gone for h in report.heads(r)), len(report.heads(r))) for r in names
            if r in report.scores]


def removal_summary(report: RoleReport, mask: HeadMask, roles: Sequence[str] | None = None) -> str:
    """One line: ``"removes 3 of 4 induction heads, 0 of 9 retrieval heads"`` (roles with heads first removed
    listed first); ``"no role heads detected"`` when the report has none."""
    rows = role_removals(report, mask, roles)
    if not rows:
        return "no role heads detected"
    rows.sort(key=lambda r: (r.removed == 0, -r.removed))
    return "removes " + ", ".join(r.text() for r in rows)
