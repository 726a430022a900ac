"""Tables and charts a student reads whole: the roles probe map is tall enough to read with its title clear of the
plot, and the Per example page of a translation model shows gold, all heads and this mask wrapped, not cut."""
from __future__ import annotations

import numpy as np
import pytest

from app.roles import figures
from browser_helpers import ok


def test_a_probe_of_few_queries_over_many_keys_is_drawn_tall_enough():
    tq, tk = 5, 700                                     # a retrieval probe: a few reading tokens, a long text read
    arr = np.full((tq, tk), 1 / tk, dtype=np.float32)
    fig = figures.probe_figure(arr, [f"q{i}" for i in range(tq)], [f"k{j}" for j in range(tk)], "layer 1, head 2")
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert fig.layout.yaxis.scaleanchor is None and plot_px >= figures.PROBE_MIN_PX
    assert fig.layout.title.yanchor == "bottom" and fig.layout.margin.t >= 60          # above the plot, not on it
    square = figures.probe_figure(np.eye(12, dtype=np.float32), [str(i) for i in range(12)],
                                  [str(i) for i in range(12)], "an induction probe")
    assert square.layout.yaxis.scaleanchor == "x"                                       # cells stay square there


@pytest.mark.usefixtures("stand_in_scripts")
def test_per_example_texts_are_shown_whole(app_for, tiny_bart):
    at = ok(app_for(tiny_bart, "app_pages/examples.py", mask="e:3.c,d:3.c,c:3.c"))
    tables = [t.value for t in at.table]
    assert tables and {"gold", "all heads", "this mask"} <= set(tables[0].columns)
