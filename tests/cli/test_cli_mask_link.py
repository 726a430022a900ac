"""``headprune evaluate --mask-link URL``: the mask of a shared dashboard link, on a tiny model."""
import json

import pytest

from pruning_core.cli.main import main
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.core.io.share_link import build_link, encode_mask, mask_from_link, parse_link
from cli_helpers import run

LAYOUT = HeadLayout({"encoder_self": (4, 4)})           # the tiny BERT: 2 layers of 4 heads


def test_link_round_trip_and_parsing():
    mask = HeadMask.full(LAYOUT).toggled("encoder_self", 0, 1)
    link = build_link("http://localhost:8501/head_map",
                      {"model": "/m y", "task": "file:/d/x.csv", "scorer": "random", "n": "16",
                       "mask": encode_mask(mask)})
    assert "mask=e:b.f" in link
    parsed = parse_link(link)
    assert (parsed.model, parsed.task, parsed.scorer, parsed.eval_limit) == ("/m y", "file:/d/x.csv", "random", 16)
    assert parsed.head_mask(LAYOUT) == mask == mask_from_link(link, LAYOUT)
    assert parse_link("?" + link.split("?", 1)[1]) == parsed                 # a bare query string too


def test_evaluate_reads_the_mask_from_a_link(workdir, capsys):  # noqa: F811
    mask = HeadMask.full(LAYOUT).toggled("encoder_self", 0, 1).toggled("encoder_self", 1, 3)
    (workdir / "m.json").write_text(json.dumps({"format": "headprune.mask/1", "model": "tiny",
                                                "kinds": {k: [list(r) for r in v] for k, v in mask.kinds.items()}}))
    link = f"http://localhost:8501/head_map?model=tiny&task=file%3Atiny.csv&scorer=gradient&n=24&mask={encode_mask(mask)}"
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--mask-link", link, "--out", "link.json") == 0
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--mask", "m.json", "--out", "file.json") == 0
    by_link, by_file = (json.loads((workdir / f).read_text()) for f in ("link.json", "file.json"))
    assert by_link["heads_kept"] == 6
    assert (by_link["metric"], by_link["loss"]) == (by_file["metric"], by_file["loss"])
    assert "6/8 heads kept" in capsys.readouterr().out


@pytest.mark.parametrize("link, message", [
    ("http://localhost:8501/head_map?model=tiny", "carries no mask"),
    ("http://localhost:8501/head_map?mask=e:fff.fff.fff", "another model"),
    ("http://localhost:8501/head_map?mask=e:zz.f", "not readable"),
])
def test_a_link_without_a_usable_mask_is_a_clear_error(workdir, capsys, link, message):  # noqa: F811
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--mask-link", link) == 2
    err = capsys.readouterr().err
    assert err.startswith("headprune: error:") and message in err


def test_mask_and_mask_link_together_are_refused(workdir, capsys):  # noqa: F811
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", "tiny", "--task", "file:tiny.csv", "--mask", "m.json", "--mask-link", "http://x/?mask=e:f.f"])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_prune_accepts_a_link(workdir):  # noqa: F811
    link = "http://localhost:8501/head_map?mask=e:3.c"
    assert run("prune", "tiny", "--mask-link", link, "--out", "pruned") == 0
    assert run("info", "pruned", "--out", "info.json") == 0
    assert json.loads((workdir / "info.json").read_text())["layout"]["encoder_self"] == [2, 2]
