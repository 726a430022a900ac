"""Head gates: no-op, effect, per-thread isolation, no leaked hooks."""
import threading

import pytest
import torch

from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, gate_heads, installed_hook_count, ones_gates
from tiny import ALL_ARCHS, logits_of, tiny_inputs, tiny_loaded


def some_mask(layout):
    return HeadMask.from_removed(layout, [(k, l, h) for k in layout.kinds for l in range(2) for h in (0, 2)])


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_full_mask_is_a_noop_and_a_mask_changes_outputs(arch, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    x = tiny_inputs(arch)
    dense = logits_of(lm.model, x)
    with apply_mask(lm, HeadMask.full(lm.layout)):
        assert torch.equal(logits_of(lm.model, x), dense)
    with gate_heads(lm.model, lm.sites, ones_gates(lm.layout)):
        assert torch.allclose(logits_of(lm.model, x), dense, atol=1e-6)
    with apply_mask(lm, some_mask(lm.layout)):
        masked = logits_of(lm.model, x)
    assert (masked - dense).abs().max() > 1e-5, "masking had no effect: the silent no-op trap"
    assert installed_hook_count(lm.model) == 0


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_each_kind_masks_separately(kind, tmp_path):
    lm = tiny_loaded("bart", tmp_path)
    x = tiny_inputs("bart")
    dense = logits_of(lm.model, x)
    mask = HeadMask.from_removed(lm.layout, [(kind, 0, 1), (kind, 1, 3)])
    with apply_mask(lm, mask):
        assert (logits_of(lm.model, x) - dense).abs().max() > 1e-6


def test_zero_gate_equals_zeroed_head_output(tmp_path):
    """Removing a head = zeroing its slice of the output projection's input."""
    lm = tiny_loaded("bert", tmp_path)
    x = tiny_inputs("bert")
    site = lm.sites[1]
    with apply_mask(lm, HeadMask.from_removed(lm.layout, [("encoder_self", 1, 2)])):
        masked = logits_of(lm.model, x)
    d = site.head_dim
    w = site.out.weight.data.clone()
    try:
        site.out.weight.data[:, 2 * d:3 * d] = 0
        zeroed = logits_of(lm.model, x)
    finally:
        site.out.weight.data.copy_(w)
    assert torch.allclose(masked, zeroed, atol=1e-6)


def test_no_hook_left_after_exception(tmp_path):
    lm = tiny_loaded("bert", tmp_path)
    with pytest.raises(RuntimeError):
        with apply_mask(lm, some_mask(lm.layout)):
            raise RuntimeError("boom")
    assert installed_hook_count(lm.model) == 0
    with pytest.raises(Exception):
        with apply_mask(lm, some_mask(lm.layout)):
            lm.model(input_ids=torch.full((1, 3), 10_000))   # index error inside forward
    assert installed_hook_count(lm.model) == 0


def test_wrong_shape_mask_is_rejected(tmp_path):
    from pruning_core.core.errors import FormatError
    lm = tiny_loaded("bert", tmp_path)
    bad = HeadMask.from_lists({"encoder_self": [[1, 0, 1], [1, 1, 1]]})
    with pytest.raises(FormatError, match="heads per layer"):
        with apply_mask(lm, bad):
            pass
    assert installed_hook_count(lm.model) == 0


def test_concurrent_masks_on_one_shared_model(tmp_path):
    """Two threads evaluating the same model with different masks at once both get correct results."""
    lm = tiny_loaded("bert", tmp_path)
    x = tiny_inputs("bert", batch=4, length=12)
    masks = [HeadMask.full(lm.layout), some_mask(lm.layout),
             HeadMask.from_removed(lm.layout, [("encoder_self", 0, h) for h in range(4)])]
    expected = []
    for m in masks:
        with apply_mask(lm, m):
            expected.append(logits_of(lm.model, x))
    errors, barrier = [], threading.Barrier(len(masks))

    def worker(i):
        try:
            barrier.wait()
            for _ in range(25):
                with apply_mask(lm, masks[i]):
                    got = logits_of(lm.model, x)
                if not torch.allclose(got, expected[i], atol=1e-6):
                    errors.append(f"thread {i} got another mask's result")
                    return
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(masks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert installed_hook_count(lm.model) == 0


def test_mask_applies_inside_generate(tmp_path):
    lm = tiny_loaded("marian", tmp_path)
    x = tiny_inputs("marian")
    x.pop("decoder_input_ids")
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, num_beams=1, output_scores=True,
              return_dict_in_generate=True)
    with torch.no_grad():
        dense = lm.model.generate(**x, **kw)
        mask = HeadMask.from_removed(lm.layout, [(k, l, h) for k in lm.layout.kinds for l in range(2) for h in range(3)])
        with apply_mask(lm, mask):
            masked = lm.model.generate(**x, **kw)
        again = lm.model.generate(**x, **kw)
    assert installed_hook_count(lm.model) == 0
    diff = (dense.scores[0] - masked.scores[0]).nan_to_num(0.0, 0.0, 0.0)   # -inf: suppressed tokens
    assert diff.abs().max() > 1e-5
    assert torch.equal(dense.scores[0], again.scores[0])
