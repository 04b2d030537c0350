"""The verdict on a paper's claim, as the claims tables print it."""
from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    """What our measurements say about a claim.

    ``INCONCLUSIVE``: the claim compares measured numbers and their difference lies within noise (its 95 %
    interval, :mod:`gflkit.papers.comparison`, crosses the claim's threshold), so this budget decides
    nothing either way. ``NOT_RUN``: what the claim needs did not run, or what ran cannot decide it.
    ``TRIVIAL``: the compared runs are identical to the scores' precision, so the claim's comparison holds or
    fails by construction, not by evidence (e.g. a hyper-parameter that changes no prediction).
    """

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"
    NOT_RUN = "not run"
    TRIVIAL = "trivial: identical runs"

    @classmethod
    def of(cls, holds: bool | None | Verdict) -> Verdict:
        """The verdict of a check that answers whether the claim ``holds``: ``True`` / ``False`` (a claim
        that is no comparison, e.g. "the objective is non-increasing"), ``None`` (cannot be decided at this
        budget: not run) or already a :class:`Verdict`."""
        if isinstance(holds, Verdict):
            return holds
        if holds is None:
            return cls.NOT_RUN
        return cls.REPRODUCED if holds else cls.NOT_REPRODUCED
