"""In the dashboard, the live panel's parameter figure says what a click saves, and on a
grouped-query model that the head's K/V head is shared ("W_Q/W_O rows of one head; its K/V head is shared by
2 others"), with counts that physical pruning confirms."""
from __future__ import annotations

from app.headmap.ui import click_saving, kv_groups_note
from pruning_core.modeling.architectures import find_sites, kv_groups_of, layout_for
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.pruning import head_savings, parameter_count, prune_heads
from tiny import llama_6_on_2, tiny_loaded

K = "decoder_self"


def test_a_grouped_query_click_saves_its_query_rows_and_says_who_shares_its_kv_head():
    model = llama_6_on_2()
    saving = head_savings(model)[K]
    assert (saving.head, saving.group_size, saving.kv_head) == (2 * 8 * 48, 3, 2 * 8 * 48)
    dense, layout = parameter_count(model), layout_for(model)
    one = prune_heads(model, HeadMask.from_removed(layout, [(K, 0, 1)]))
    group = prune_heads(model, HeadMask.from_removed(layout, [(K, 0, h) for h in (0, 1, 2)]))
    assert dense - parameter_count(one) == saving.head
    assert dense - parameter_count(group) == 3 * saving.head + saving.kv_head
    text = click_saving(head_savings(model))
    assert text.startswith("A click on a head removes its W_Q rows and W_O columns (768 parameters)")
    assert "its K/V head is shared by 2 others" in text
    note = kv_groups_note(K, kv_groups_of(find_sites(model))[K])
    assert "never adds parameters" in note and "repeats" not in note and "can grow" not in note


def test_without_grouping_a_click_saves_all_four_projections_of_one_head(tmp_path):
    lm = tiny_loaded("bart", tmp_path)                 # three kinds, the same saving: said once
    text = click_saving(head_savings(lm.model))
    assert text.count("a click on a head") + text.count("A click on a head") == 1
    assert "W_Q, W_K, W_V rows and W_O columns" in text and "K/V head" not in text
