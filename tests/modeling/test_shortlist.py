"""Marian's binary vocabulary shortlist: reading a file the test writes, Marian's checksum, the allowed ids of a
sentence, and one clear error for a cut or altered file."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.sources.loading import load_model, save_pruned
from pruning_core.modeling.pruning import prune_heads
from pruning_core.modeling.inference.shortlist import MAGIC, SHORTLIST_FILE, marian_checksum, read_shortlist
from tiny import tiny_loaded


def write_shortlist(path, lists: list[list[int]], first_num: int = 4, best_num: int = 3) -> bytes:
    offsets = np.cumsum([0] + [len(x) for x in lists]).astype("<u8")
    targets = np.array([t for x in lists for t in x], dtype="<u4")
    body = np.array([first_num, best_num, len(offsets), len(targets)], dtype="<u8").tobytes() + \
        offsets.tobytes() + targets.tobytes()
    words = np.frombuffer(body[:len(body) // 8 * 8], "<u8")
    blob = np.array([MAGIC, marian_checksum(words)], dtype="<u8").tobytes() + body
    path.write_bytes(blob)
    return blob


LISTS = [[], [], [], [], [], [20, 21], [22], [5, 23, 24], [], []]      # source ids 0..9


def test_a_sentence_may_use_the_first_ids_its_pieces_lists_and_its_pieces_padded_to_eight(tmp_path):
    write_shortlist(tmp_path / "lex.bin", LISTS)
    sl = read_shortlist(tmp_path / "lex.bin")
    assert (sl.first_num, sl.best_num, sl.n_sources) == (4, 3, 10)
    ids = sl.row_ids([5, 7, 0], vocab=40).tolist()
    # ids 0-3; lists of 5 and 7; pieces 5 and 7 (shared vocabulary); 0 is below first_num: 9, padded to 16 from 4 up
    core = {0, 1, 2, 3, 20, 21, 5, 23, 24, 7}
    assert core <= set(ids) and len(ids) % 8 == 0 and len(ids) == 16
    assert set(ids) - core == {4, 6, 8, 9, 10, 11}


def test_each_row_of_a_batch_gets_its_own_ids(tmp_path):
    write_shortlist(tmp_path / "lex.bin", LISTS)
    sl = read_shortlist(tmp_path / "lex.bin")
    inputs = torch.tensor([[5, 0, 9], [6, 0, 9]])
    allowed = sl.allowed(inputs, torch.tensor([[1, 1, 0], [1, 1, 0]]), vocab=40)        # 9 is padding
    for row, source in zip(allowed.row_mask, ([5, 0], [6, 0])):
        assert allowed.ids[row].tolist() == sl.row_ids(source, 40).tolist()


@pytest.mark.parametrize("damage, why", [
    (lambda b: b[:-4], "header promises"),
    (lambda b: b[:20], "shorter than its header"),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "checksum"),
    (lambda b: bytes(8) + b[8:], "magic"),
])
def test_a_cut_or_altered_file_gives_one_clear_error(tmp_path, damage, why):
    blob = write_shortlist(tmp_path / "ok.bin", LISTS)
    (tmp_path / "bad.bin").write_bytes(damage(blob))
    with pytest.raises(FormatError, match=why) as err:
        read_shortlist(tmp_path / "bad.bin", "run `headprune prepare --model x --force`")
    assert "\n" not in str(err.value) and "bad.bin" in str(err.value) and "--force" in str(err.value)


def test_a_pruned_model_keeps_its_shortlist(tmp_path):
    """``save_pruned`` copies the source model's shortlist, so the pruned folder decodes as the source did."""
    tiny = tiny_loaded("marian-ssru", tmp_path)
    source = tmp_path / "source"
    tiny.model.save_pretrained(source)
    tiny.tokenizer.save_pretrained(source)
    write_shortlist(source / SHORTLIST_FILE, LISTS)
    loaded = load_model(str(source), device="cpu")
    assert loaded.shortlist is not None
    kind = next(iter(loaded.layout.kinds))
    pruned = prune_heads(loaded.model, HeadMask.full(loaded.layout).toggled(kind, 0, 0))
    out = save_pruned(pruned, loaded.tokenizer, tmp_path / "pruned", shortlist=loaded.shortlist)
    again = load_model(str(out), device="cpu")
    assert again.shortlist is not None and again.shortlist.sha256 == loaded.shortlist.sha256
