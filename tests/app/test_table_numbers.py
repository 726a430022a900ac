"""Result tables a student reads (issue 30, item 13): a perplexity of 61,925.01 has its thousands separators;
a loss of 0.3178 and a p of 0.00002 stay as they are (a localized format would round them)."""
from __future__ import annotations

import pandas as pd

from app.core import ui


def test_only_large_numbers_get_thousands_separators(monkeypatch):
    seen = {}
    monkeypatch.setattr(ui.st, "dataframe", lambda frame, **kw: seen.update(kw))
    frame = pd.DataFrame({"Perplexity": [61925.01, 136.2], "Loss (nats)": [0.3178, 11.03], "p": [2e-5, 0.64],
                          "Layer": [0, 29], "Significant": [True, False], "Attention": ["decoder", "decoder"]})
    ui.table(frame, height=100)
    assert set(seen["column_config"]) == {"Perplexity"}
    assert seen["height"] == 100 and seen["hide_index"] is True
