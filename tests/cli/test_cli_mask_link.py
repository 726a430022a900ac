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
    assert parse_link(link.split("?", 1)[1]) == parsed
    assert parse_link(link.replace("localhost", "[::1]")) == parsed           # brackets around an IPv6 address


@pytest.mark.parametrize("link", ["http://localhost[]:8501/head_map?mask=e:b.f", "http://[x/?n=1",
                                  "http://h:port/?n=1", "http://h/?n=-3", "http://h/?n=1.5", "https:///?n=1"])
def test_parse_link_refuses_a_malformed_link_with_a_format_error(link):
    from pruning_core.core.errors import FormatError

    with pytest.raises(FormatError, match="Copy the whole link again"):
        parse_link(link)


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
    ("http://localhost:8501/head_map?mask=e:fff.fff.fff", "another model"),
    ("http://localhost:8501/head_map?mask=e:zz.f", "not readable"),
])
def test_a_link_without_a_usable_mask_is_a_clear_error(workdir, capsys, link, message):  # noqa: F811
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--mask-link", link) == 2
    err = capsys.readouterr().err
    assert err.startswith("headprune: error:") and message in err


TINY_LINK = "http://localhost:8501/head_map?model=tiny&task=file%3Atiny.csv&scorer=gradient&n=16"


def test_evaluate_takes_the_model_task_and_size_from_the_link(workdir, capsys):  # noqa: F811
    """The link alone evaluates what the page did: its model, task and first n examples, the figure printed as
    the page rounds it; the same as spelling them out."""
    from app.core import uncertainty
    from pruning_core.evaluation.results import EvalResult

    link = f"{TINY_LINK}&mask=e:7.f"
    assert run("evaluate", "--mask-link", link, "--out", "link.json") == 0
    out = capsys.readouterr().out
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--limit", 16, "--mask-link", link, "--out",
               "spelled.json") == 0
    by_link, spelled = (json.loads((workdir / f).read_text()) for f in ("link.json", "spelled.json"))
    assert by_link["n_examples"] == 16 and by_link["heads_kept"] == 7
    assert (by_link["metric"], by_link["loss"]) == (spelled["metric"], spelled["loss"])
    assert "overrides" not in out and "16 examples, 7/8 heads kept" in out
    ev = EvalResult.from_json(by_link)
    seen = uncertainty.shown(ev)
    page = uncertainty.labelled(ev.metric_name, f"{seen.value} ({seen.interval})")
    assert f"  as the dashboard shows it: {page}, loss {ev.loss:.4f}\n" in out


def test_an_option_given_on_the_command_line_wins_and_says_so(workdir, capsys):  # noqa: F811
    link = f"{TINY_LINK}&mask=e:7.f"
    assert run("evaluate", "--limit", 20, "--task", "file:./tiny.csv", "--mask-link", link, "--out", "o.json") == 0
    out = capsys.readouterr().out
    assert "--limit 20 given: overrides the link's n=16\n" in out
    assert "--task file:./tiny.csv given: overrides the link's task=file:tiny.csv\n" in out
    assert json.loads((workdir / "o.json").read_text())["n_examples"] == 20


def test_a_link_with_every_head_kept_evaluates_the_whole_model(workdir, capsys):  # noqa: F811
    assert run("evaluate", "--mask-link", TINY_LINK, "--out", "link.json") == 0
    assert run("evaluate", "tiny", "--task", "file:tiny.csv", "--limit", 16, "--out", "dense.json") == 0
    by_link, dense = (json.loads((workdir / f).read_text()) for f in ("link.json", "dense.json"))
    assert (by_link["metric"], by_link["loss"], by_link["n_examples"]) == (dense["metric"], dense["loss"], 16)


@pytest.mark.parametrize("link, message", [
    ("http://localhost[]:8501/head_map?model=tiny&mask=e:7.f", "brackets belong only around an IPv6 address"),
    ("http://[::1/head_map?model=tiny&mask=e:7.f", "not a readable URL"),
    ("http://localhost:85x1/head_map?model=tiny&mask=e:7.f", "not a readable URL"),
    ("http://localhost:8501/head map?model=tiny&mask=e:7.f", "a space or a line break"),
    ("ftp://localhost/head_map?model=tiny&mask=e:7.f", "not an http(s) link"),
    (f"{TINY_LINK.replace('n=16', 'n=0')}", "n='0' is not a whole number of at least 1"),
    (f"{TINY_LINK.replace('n=16', 'n=many')}", "n='many' is not a whole number of at least 1"),
    ("http://localhost:8501/head_map?mask=e:7.f", "Give a model and --task (the link names none)"),
])
def test_a_malformed_link_is_a_clear_error(workdir, capsys, link, message):  # noqa: F811
    assert run("evaluate", "--mask-link", link) == 2          # a bare exception would escape run()
    err = capsys.readouterr().err
    assert err.startswith("headprune: error:") and message in err and "Traceback" not in err


def test_evaluate_without_a_model_or_a_link_says_what_to_give(workdir, capsys):  # noqa: F811
    assert run("evaluate", "--task", "file:tiny.csv") == 2
    assert "Give a model (or pass --mask-link" in capsys.readouterr().err


def test_prune_refuses_a_link_without_a_mask(workdir, capsys):  # noqa: F811
    assert run("prune", "tiny", "--mask-link", "http://localhost:8501/head_map?model=tiny", "--out", "p") == 2
    assert "carries no mask" in capsys.readouterr().err


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
