"""The live panel draws a decoding evaluation's metric before its loss, and a finished evaluation's figures, in place
before the fragment's rerun redraws the map."""
from dataclasses import dataclass, field

from app.headmap import panel
from pruning_core.core.heads import HeadMask, HeadLayout
from pruning_core.evaluation.results import EvalResult


@dataclass
class Slot:
    """An st.empty stand-in: what was written last."""
    text: list = field(default_factory=list)

    def markdown(self, text: str) -> None:
        self.text.append(text)


@dataclass
class FakeWork:
    result: EvalResult | None
    early: EvalResult | None = None
    busy: bool = False

    def ready(self):
        return self.result

    def partial(self):
        return self.early

    def running(self):
        return self.busy


def _mask() -> HeadMask:
    return HeadMask.full(HeadLayout({"encoder_self": (4, 4)})).toggled("encoder_self", 1, 2)


def test_a_finished_evaluation_is_drawn_in_the_strip_and_the_panel_line():
    ev = EvalResult("accuracy", 0.8125, 0.41234, 128, interval=(0.74, 0.87))
    mask, strip, note = _mask(), Slot(), Slot()
    early = panel.EarlyMetric(sel=None, mask=mask, work=FakeWork(ev), note=note, strip=strip)
    early.draw_done()
    assert strip.text == [panel._strip_done(mask, ev)]
    assert "7 / 8" in strip.text[0] and "0.4123" in strip.text[0] and "updating" not in strip.text[0]
    assert "0.4123" in note.text[0] and "for 7 / 8 heads" in note.text[0]


def test_nothing_is_drawn_while_the_evaluation_runs_or_after_it_failed():
    strip, note = Slot(), Slot()
    panel.EarlyMetric(sel=None, mask=_mask(), work=FakeWork(None, busy=True), note=note, strip=strip).draw_done()
    assert strip.text == [] and note.text == []


def test_a_decoded_metric_is_drawn_before_its_loss_once():
    """The partial result (the metric, its loss still NaN) is drawn with the loss "computing…", rounded as the
    finished result will be; the same partial is not drawn twice."""
    early_ev = EvalResult("bleu", 0.3149, float("nan"), 128, interval=(0.29, 0.34))
    mask, strip, note = _mask(), Slot(), Slot()
    early = panel.EarlyMetric(sel=None, mask=mask, work=FakeWork(None, early_ev, busy=True), note=note, strip=strip)
    assert early.draw()
    assert not early.draw()
    label, value = panel._metric_text(early_ev)
    assert f"{label} **{value}**" in strip.text[0] and "computing" in strip.text[0] and "updating" not in strip.text[0]
    assert "nan" not in strip.text[0].lower() and "nan" not in note.text[0].lower()
    assert f"{label} **{value}** for 7 / 8 heads" in note.text[0]
