"""No traceback on any input: every bad option value, output path or mask is refused with
exit status 2 and one line ``headprune: error: ...`` that names the value, before a model is loaded
where the value alone shows it is wrong."""
import json
import os

import pytest

from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.core.errors import FormatError
from pruning_core.core.io.share_link import decode_mask
from cli_helpers import run

TASK = ("--task", "file:tiny.csv")
LAYOUT = HeadLayout({"encoder_self": (4, 4)})           # the tiny BERT: 2 layers of 4 heads


def refused(capsys, *args) -> str:
    """Run the command; assert exit 2 and one clean error line; return that line."""
    assert run(*args) == 2
    err = capsys.readouterr().err
    assert err.startswith("headprune: error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def files(workdir):
    """A scores file, a folder, and a plain file to put paths under."""
    assert run("score", "tiny", *TASK, "--method", "random", "--out", "s.json") == 0
    (workdir / "folder").mkdir()
    (workdir / "plain.txt").write_text("not a folder\n")
    return workdir


# -- output paths: every command with --out ------------------------------------------------------

FILE_OUT_COMMANDS = {
    "score": ("score", "tiny", *TASK, "--method", "random"),
    "mask": ("mask", "s.json", "--remove", "0.5"),
    "evaluate": ("evaluate", "tiny", *TASK),
    "ablate": ("ablate", "tiny", *TASK),
    "one-per-layer": ("one-per-layer", "tiny", *TASK),
    "curve": ("curve", "tiny", *TASK, "--method", "random"),
    "bench": ("bench", "tiny", "--batch-sizes", "1", "--seq-len", "8", "--repeats", "1"),
    "info": ("info", "tiny"),
    "smp train": ("smp", "train"),
    "smp finetune": ("smp", "finetune"),
    "smp compare": ("smp", "compare"),
}


@pytest.mark.parametrize("command", FILE_OUT_COMMANDS)
def test_out_that_is_a_folder(files, capsys, command):
    err = refused(capsys, *FILE_OUT_COMMANDS[command], "--out", "folder")
    assert "--out 'folder' is a folder; give a file name" in err


@pytest.mark.parametrize("command", FILE_OUT_COMMANDS)
def test_out_under_a_file(files, capsys, command):
    err = refused(capsys, *FILE_OUT_COMMANDS[command], "--out", "plain.txt/sub/r.json")
    assert "'plain.txt' is a file, not a folder" in err
    assert (files / "plain.txt").read_text() == "not a folder\n"


@pytest.mark.parametrize("command", FILE_OUT_COMMANDS)
def test_out_not_writable(files, capsys, command):
    # root may write anywhere a chmod forbids, so use a folder of the kernel's where nobody can create files
    err = refused(capsys, *FILE_OUT_COMMANDS[command], "--out", "/proc/headprune-out.json")
    assert "--out '/proc/headprune-out.json' cannot be written" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can create files in a read-only folder")
def test_out_in_a_read_only_folder(files, capsys):
    (files / "folder").chmod(0o555)
    try:
        assert "cannot be written" in refused(capsys, "evaluate", "tiny", *TASK, "--out", "folder/e.json")
    finally:
        (files / "folder").chmod(0o755)


def test_out_in_missing_folders_is_created(files):
    assert run("evaluate", "tiny", *TASK, "--out", "new/deeper/e.json") == 0
    assert json.loads((files / "new/deeper/e.json").read_text())["format"] == "headprune.eval/1"


@pytest.mark.parametrize("out, message", [
    ("plain.txt", "--out 'plain.txt' is a file; a model is saved as a folder"),
    ("plain.txt/model", "'plain.txt' is a file, not a folder"),
    ("/proc/headprune-model", "--out '/proc/headprune-model' cannot be written"),
    ("folder-full", "exists and is not empty"),
])
def test_prune_out_folder(files, capsys, out, message):
    (files / "folder-full").mkdir()
    (files / "folder-full" / "x").write_text("x")
    link = "http://localhost:8501/head_map?mask=e:3.c"
    assert message in refused(capsys, "prune", "tiny", "--mask-link", link, "--out", out)
    assert (files / "plain.txt").read_text() == "not a folder\n"


def test_smp_finetune_save_under_a_file(files, capsys):
    assert "'plain.txt' is a file" in refused(capsys, "smp", "finetune", "--save", "plain.txt/model")


# -- numbers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (("evaluate", "tiny", *TASK, "--batch-size", "0"), "--batch-size must be a whole number of at least 1; got 0"),
    (("score", "tiny", *TASK, "--batch-size", "-3"), "--batch-size must be a whole number of at least 1; got -3"),
    (("ablate", "tiny", *TASK, "--batch-size", "0"), "--batch-size must be"),
    (("curve", "tiny", *TASK, "--batch-size", "0"), "--batch-size must be"),
    (("evaluate", "tiny", *TASK, "--limit", "0"), "--limit must be a whole number of at least 1; got 0"),
    (("one-per-layer", "tiny", *TASK, "--limit", "-1"), "--limit must be a whole number of at least 1; got -1"),
    (("curve", "tiny", *TASK, "--score-limit", "0"), "--score-limit must be"),
    (("curve", "tiny", *TASK, "--step", "0"), "--step must be a fraction in (0, 1]"),
    (("curve", "tiny", *TASK, "--step", "-0.1"), "got -0.1"),
    (("curve", "tiny", *TASK, "--step", "1.5"), "got 1.5"),
    (("bench", "tiny", "--batch-sizes", "0,8"), "--batch-sizes must be whole numbers of at least 1"),
    (("bench", "tiny", "--seq-len", "0"), "--seq-len must be"),
    (("bench", "tiny", "--repeats", "0"), "--repeats must be"),
    (("smp", "finetune", "--batch-size", "0"), "--batch-size must be"),
    (("smp", "finetune", "--keep", "0"), "--keep must be a fraction"),
    (("smp", "train", "--steps", "0"), "--steps must be"),
    (("smp", "compare", "--random-seeds", "0"), "--random-seeds must be"),
])
def test_numbers_out_of_range(workdir, capsys, args, message):
    assert message in refused(capsys, *args)


def test_a_step_of_exactly_one_is_fine(workdir):
    assert run("curve", "tiny", *TASK, "--method", "random", "--step", "1", "--score-split", "test") == 0


# -- beams -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("beams, message", [
    ("0", "--beams must be a whole number of at least 1; got 0"),
    ("-2", "--beams must be a whole number of at least 1; got -2"),
    ("4", "beams 4 has no effect on classification task 'file:tiny.csv'"),
])
def test_beams_on_classification(workdir, capsys, beams, message):
    assert message in refused(capsys, "evaluate", "tiny", *TASK, "--beams", beams)


def test_beams_one_on_classification_is_fine(workdir):
    assert run("evaluate", "tiny", *TASK, "--beams", "1") == 0


# -- a model with every head removed ---------------------------------------------------------------

@pytest.fixture
def headless(workdir):
    (workdir / "zero.json").write_text(json.dumps({"format": "headprune.mask/1", "model": "tiny",
                                                   "kinds": {"encoder_self": [[0] * 4] * 2}}))
    assert run("prune", "tiny", "--mask", "zero.json", "--out", "headless") == 0
    return workdir


@pytest.mark.parametrize("args, what", [
    (("score", "headless", *TASK), "none to score"),
    (("score", "headless", *TASK, "--method", "random"), "none to score"),
    (("curve", "headless", *TASK), "none to prune step by step"),
    (("ablate", "headless", *TASK), "none to ablate"),
    (("one-per-layer", "headless", *TASK), "none to reduce to one per layer"),
])
def test_a_model_without_heads_is_refused_clearly(headless, capsys, args, what):
    err = refused(capsys, *args)
    assert "'headless' has no attention heads left" in err and what in err


def test_a_model_without_heads_still_evaluates(headless, capsys):
    assert run("evaluate", "headless", *TASK, "--out", "e.json") == 0
    assert json.loads((headless / "e.json").read_text())["n_examples"] == 24


def test_gradient_scores_of_a_model_without_heads_are_empty(headless):
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.scoring import ScoreConfig, get_scorer
    from pruning_core.tasks import get_task
    loaded = load_model(str(headless / "headless"), device="cpu")
    result = get_scorer("gradient").score(loaded, get_task("file:tiny.csv"), ScoreConfig(split="test"))
    assert result.scores.to_json() == {"encoder_self": [[], []]}


# -- masks -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0.5, 0.9, 1.0, True, False, "1", "0", None, 2, -1])
def test_mask_file_values_other_than_0_and_1(workdir, capsys, value):
    rows = [[1, 1, 1, 1], [1, 1, 1, 1]]
    rows[1][2] = value
    (workdir / "m.json").write_text(json.dumps({"format": "headprune.mask/1", "model": "tiny",
                                                "kinds": {"encoder_self": rows}}))
    err = refused(capsys, "evaluate", "tiny", *TASK, "--mask", "m.json")
    assert "Mask file 'm.json'" in err and "exactly 0 (removed) or 1 (kept)" in err
    assert f"encoder_self layer 1 head 2 is {value!r}" in err


@pytest.mark.parametrize("kinds", [{"encoder_self": "1111"}, {"encoder_self": ["1111", "1111"]},
                                   {"encoder_self": [1, 1]}])
def test_mask_file_rows_that_are_not_lists(workdir, capsys, kinds):
    (workdir / "m.json").write_text(json.dumps({"format": "headprune.mask/1", "model": "tiny", "kinds": kinds}))
    assert "must be lists of 0/1 per layer" in refused(capsys, "evaluate", "tiny", *TASK, "--mask", "m.json")


def test_from_lists_accepts_ints_only():
    assert HeadMask.from_lists({"encoder_self": [[1, 0], (0, 1)]}).n_kept == 2
    for bad in (0.5, 1.0, True, "1"):
        with pytest.raises(FormatError, match="exactly 0"):
            HeadMask.from_lists({"encoder_self": [[1, bad]]})


@pytest.mark.parametrize("text, message", [
    ("e:0x3.c", "'0x3'; it must be exactly 1 hex digit"),
    ("e:03.c", "'03'; it must be exactly 1 hex digit"),
    ("e:-1.c", "'-1'"),
    ("e:1_3.c", "'1_3'"),
    ("e: 3.c", "' 3'"),
    ("e:3.c,e:3.c", "encoder_self is given twice"),
])
def test_link_mask_text_is_strict(text, message):
    with pytest.raises(FormatError, match="not readable") as exc:
        decode_mask(text, LAYOUT)
    assert message in str(exc.value)


def test_link_mask_text_accepts_upper_case_hex():
    assert decode_mask("e:F.c", LAYOUT) == decode_mask("e:f.c", LAYOUT)


def test_link_with_a_lenient_mask_is_refused_by_the_cli(workdir, capsys):
    err = refused(capsys, "evaluate", "tiny", *TASK, "--mask-link", "http://localhost:8501/?mask=e:03.c")
    assert "not readable" in err and "'03'" in err


def test_a_write_that_fails_late_is_a_clean_error(workdir, capsys, monkeypatch):
    import pruning_core.evaluation.results

    def full_disk(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(pruning_core.evaluation.results, "write_json", full_disk)
    assert run("evaluate", "tiny", *TASK, "--out", "e.json") == 2
    err = capsys.readouterr().err                     # the progress bar of the evaluation comes first
    assert "Traceback" not in err and err.rstrip().endswith("Choose a folder you can write to.")
    assert "headprune: error: Could not write --out 'e.json': No space left on device" in err


# -- files and links a user feeds: one line, never a traceback (the readers' property tests are *_fuzzed.py) --

DEEP = "[" * 5000 + "]" * 5000
MASK_1 = {"format": "headprune.mask/1", "model": "tiny", "kinds": {"encoder_self": [[1, 1, 1, 1], [1, 0, 1, 1]]}}
SCORES_1 = {"format": "headprune.scores/1", "method": "random", "normalized": False,
            "kinds": {"encoder_self": [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]}, "seconds": 1.0}
POLICY_1 = {"format": "headprune.kv_policy/1", "sink": 4, "window": 8, "streaming": [[0], [1]], "source": {}}
BAD_FILES = {
    "mask": [DEEP, json.dumps({**MASK_1, "kinds": [[1, 1]]}), json.dumps(MASK_1).replace("[1, 0", "[" + "9" * 5000)],
    "scores": [json.dumps({**SCORES_1, "kinds": [1, 2]}), json.dumps({**SCORES_1, "seconds": [1]}),
               json.dumps({**SCORES_1, "seconds": "fast"}), json.dumps(SCORES_1).replace("0.5", "1e999"), DEEP],
    "kv-policy": [json.dumps({**POLICY_1, "sink": 1e308}).replace("1e+308", "1e999"),
                  json.dumps({**POLICY_1, "streaming": [[2], [0]]}), json.dumps({**POLICY_1, "window": 2 ** 70})],
    "data": ['{"text": "a", "label": 0}\n{"text": "b", "label": 100000000000000000000000}\n',
             '{"text": "a", "label": 0}\n' + DEEP + "\n", "text,label\nx,1\ny," + "9" * 5000 + "\n"],
}
COMMANDS = {   # the command that reads each kind of file, as a function of the file's name
    "mask": lambda name: ("evaluate", "tiny", *TASK, "--mask", name),
    "scores": lambda name: ("mask", name, "--remove", "0.5", "--out", "m.json"),
    "kv-policy": lambda name: ("evaluate", "tiny", *TASK, "--kv-policy", name),
    "data": lambda name: ("evaluate", "tiny", "--task", f"file:{name}"),
}
CASES = [(kind, i) for kind, texts in BAD_FILES.items() for i in range(len(texts))]


@pytest.mark.parametrize("kind, i", CASES, ids=[f"{k}-{i}" for k, i in CASES])
def test_a_bad_file_is_one_line_without_a_traceback(workdir, capsys, kind, i):
    name = "bad.csv" if BAD_FILES[kind][i].startswith("text,label") else "bad.jsonl" if kind == "data" else "bad.json"
    (workdir / name).write_text(BAD_FILES[kind][i])
    assert name in refused(capsys, *COMMANDS[kind](name))
    assert not (workdir / "m.json").exists()


@pytest.mark.parametrize("link", ["http://localhost[]:8501/head_map?mask=e:f.f",
                                  "http://[::1:8501/head_map?mask=e:f.f",
                                  "http://localhost:8501/head_map?n=-3&mask=e:f.f",
                                  "http://localhost:8501/head_map?mask=e:f.f" + ".f" * 5000])
def test_a_bad_link_is_one_line_without_a_traceback(workdir, capsys, link):
    assert "link" in refused(capsys, "evaluate", "tiny", *TASK, "--mask-link", link)
