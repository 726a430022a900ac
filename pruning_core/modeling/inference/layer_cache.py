"""Evaluation that recomputes only from the first layer whose heads changed: cached layer inputs.

The hidden state entering layer ``L`` depends only on the batch and the mask rows of layers ``0 .. L-1``;
a :class:`LayerInputCache` keeps it per evaluation batch (keyed by model, weights hash, task, split,
examples, batch size, device and those rows), and :func:`forward_for` starts each batch at the first
changed layer. Exact: the same modules run on the same tensors, with the arguments recorded from a full
pass, then the head the adapter describes (``layer_stack``, or ``encoder_stack`` for an encoder-decoder, whose
cross-attention keys and values are kept per encoder mask too: :func:`filled_cache`); the layer-cache tests
check equal results for every family. Training mode, a data-parallel share and a key/value cache run the whole
model. Memory: at most ``max_bytes`` (:func:`pruning_core.bench.budget.layer_cache_budget`), least recently used
first, the all-heads inputs last; recording hooks are scoped to one pass; modules are never replaced.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any

import torch

from pruning_core.modeling.architectures import EncoderStack, LayerStack, adapter_for
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import shared_hooks

Forward = Callable[[int, Any], Any]     # (batch number, EncodedBatch) -> model outputs with ``.logits``
_PLAIN = (type(None), bool, int, float, str, torch.Tensor, torch.dtype, torch.device)

# id(layer module) -> (layer index, the current batch's recorded (args, kwargs) per layer); ("output", id(last
# encoder layer)) -> (number of layers, the same list): that layer's output
_RECORDING: ContextVar[dict[Hashable, tuple[int, list]] | None] = ContextVar("headprune_layer_inputs", default=None)


def _record_hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    active = _RECORDING.get()
    if active is not None and id(module) in active:
        index, calls = active[id(module)]
        calls[index] = (args, dict(kwargs))


class LayerInputCache:
    """Hidden states entering each layer, per evaluation batch, shared by every thread; once more than
    ``max_bytes`` are held, the least recently used entries go first, those stored with ``keep`` last.

    ``resumed`` / ``full``: evaluations that started from a cached layer / ran the whole model.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be 0 or more, got {max_bytes}.")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.resumed = 0
        self.full = 0
        self._entries: OrderedDict[Hashable, tuple[Any, int, bool]] = OrderedDict()     # value, bytes, keep
        self._lock = threading.Lock()
        self._watched: dict[int, weakref.finalize] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: Any, nbytes: int, keep: bool = False) -> None:
        """Store ``value`` (``nbytes`` large) under ``key``; an entry larger than the whole budget is not kept.
        ``keep``: dropped only once no other entry is left to drop (then least recently used first)."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            if nbytes > self.max_bytes:
                return
            self._entries[key] = (value, nbytes, keep)
            self.nbytes += nbytes
            while self.nbytes > self.max_bytes:
                victim = next((k for k, entry in self._entries.items() if not entry[2]), None)
                if victim is None:
                    victim = next(iter(self._entries))
                self.nbytes -= self._entries.pop(victim)[1]

    def counted(self, *, resumed: bool) -> None:
        with self._lock:
            if resumed:
                self.resumed += 1
            else:
                self.full += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def watch(self, model: torch.nn.Module) -> None:
        """Drop ``model``'s entries when it is collected (its ``id`` may then name another model)."""
        ident = id(model)
        with self._lock:
            if ident not in self._watched:
                self._watched[ident] = weakref.finalize(model, self._forget, ident)

    def _forget(self, ident: int) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[0][0] == ident]:
                self.nbytes -= self._entries.pop(key)[1]
            self._watched.pop(ident, None)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _plain(value: Any) -> bool:
    """Whether a recorded layer argument can be reused for a later pass (no state such as a cache)."""
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return isinstance(value, _PLAIN)


def _nbytes(value: Any) -> int:
    """Bytes of the distinct tensor storages in ``value`` (shared ones counted once)."""
    seen: dict[int, int] = {}
    for t in _tensors(value):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _plain_forward(loaded) -> Forward:
    return lambda i, batch: loaded.model(**batch.inputs)


@contextlib.contextmanager
def forward_for(loaded, data, mask: HeadMask | None, batch_size: int,
                cache: LayerInputCache | None) -> Iterator[Forward]:
    """A forward function for the batches of one evaluation of ``loaded`` under ``mask`` on ``data``
    (call it inside the evaluation's ``torch.inference_mode()`` and ``apply_mask``); with ``cache`` it
    starts at the deepest layer whose input for this mask's first rows is cached, and on success stores
    the inputs it computed. Without ``cache``, or for a model it cannot resume: ``model(**inputs)``."""
    model = loaded.model
    stack = _stack(model) if cache is not None and not model.training else None
    if stack is None:
        yield _plain_forward(loaded)
        return
    cache.watch(model)
    base = (id(model), loaded.weights_sha256, data.task.name, data.split, data.n_examples, data.fingerprint,
            batch_size, str(loaded.device))
    layout_rows = (mask or HeadMask.full(loaded.layout)).kinds[stack.kind]       # one 0/1 row per layer
    starts = _starts(stack)
    context = cache.get((base, "context"))              # per batch: per layer, its (args, kwargs) after the hidden state
    start, inputs = 0, None
    if context is not None:
        for layer in range(starts - 1, -1, -1):
            inputs = cache.get((base, layer, layout_rows[:layer]))
            if inputs is not None:
                start = layer
                break
    computed: dict[int, list[torch.Tensor]] = {}
    cross_key = (base, "cross", layout_rows) if isinstance(stack, EncoderStack) else None
    cross = cache.get(cross_key) if cross_key is not None and start == len(stack.layers) else None
    projected = _Projected(cache.max_bytes) if cross_key is not None and cross is None else None
    if inputs is None:
        recorded: list[list] = []
        with recording_layer_calls(model, stack) as record:
            yield lambda i, batch: _kept(projected, record(i, batch, recorded))
        if not all(call is not None and call[0] and _plain(call) for batch in recorded for call in batch):
            return                         # a layer not called once with the hidden state first, or an argument with state
        context = [[(args[1:], kwargs) for args, kwargs in batch] for batch in recorded]
        cache.put((base, "context"), context, _nbytes(context), keep=True)
        computed = {layer: [batch[layer][0][0] for batch in recorded] for layer in range(starts)}
        cache.counted(resumed=False)
    else:
        yield lambda i, batch: _kept(projected, _resume(stack, start, inputs[i], context[i], computed, batch,
                                                        None if cross is None else cross[i]))
        cache.counted(resumed=True)
    for layer, hidden in computed.items():      # the inputs every session's first click resumes from: kept longest
        cache.put((base, layer, layout_rows[:layer]), hidden, _nbytes(hidden),
                  keep=all(all(row) for row in layout_rows[:layer]))
    if projected is not None and projected.batches is not None:     # never pushes out the inputs kept longest
        cache.put(cross_key, projected.batches, projected.nbytes)


def _stack(model: torch.nn.Module) -> LayerStack | EncoderStack | None:
    adapter = adapter_for(model)
    return adapter.layer_stack(model) or adapter.encoder_stack(model)


def _starts(stack: LayerStack | EncoderStack) -> int:
    """How many places a pass can start from: each layer, and for an encoder-decoder also after the last
    encoder layer (a change in the decoder's heads runs the decoder alone)."""
    return len(stack.layers) + isinstance(stack, EncoderStack)


def _resume(stack: LayerStack | EncoderStack, start: int, hidden: torch.Tensor, calls: list, computed: dict, batch,
            cross: tuple | None = None):
    """The model's outputs for ``batch`` from layer ``start`` on, given that layer's input ``hidden`` (and for an
    encoder-decoder resumed after its encoder, ``cross``: the cross-attention keys and values of :func:`cross_of`)."""
    out = run_layers(stack, start, hidden, calls, computed, batch.n_examples)
    if isinstance(stack, EncoderStack) and start < len(stack.layers):
        computed.setdefault(len(stack.layers), []).append(out)
    inputs = batch.inputs if cross is None else {**batch.inputs, "past_key_values": filled_cache(cross)}
    return stack.finish(out, inputs)


class _Projected:
    """The cross-attention keys and values each batch of one pass projected (:func:`cross_of`), while they fit
    ``max_bytes``; ``batches`` None once a batch has none or they outgrow it."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.nbytes = max_bytes, 0
        self.batches: list[tuple] | None = []

    def add(self, outputs: Any) -> None:
        pairs = cross_of(outputs) if self.batches is not None else None
        if pairs is None:
            self.batches = None
            return
        self.nbytes += _nbytes(pairs)
        if self.nbytes > self.max_bytes:
            self.batches = None
        else:
            self.batches.append(pairs)


def _kept(projected: _Projected | None, outputs: Any) -> Any:
    if projected is not None:
        projected.add(outputs)
    return outputs


def cross_of(outputs: Any) -> tuple | None:
    """Per decoder layer the cross-attention ``(keys, values)`` ``[B, heads, S, head_dim]`` that a teacher-forced
    pass left in its outputs' ``past_key_values`` (None for a layer left empty), or None when that is no
    encoder-decoder cache of plain dynamic layers."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(getattr(getattr(outputs, "past_key_values", None), "cross_attention_cache", None), "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    return tuple((layer.keys, layer.values) if layer.is_initialized else None for layer in layers)


def filled_cache(cross: tuple):
    """A new transformers ``EncoderDecoderCache`` whose self-attention part is empty and whose cross-attention part
    holds ``cross`` (:func:`cross_of`): the model's cross-attention then reads these keys and values instead of
    projecting the encoder output, as in its decoding steps. The tensors are shared, not copied: a model reads
    them, and what changes during decoding (the rows kept) changes this container only."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache

    layers = []
    for pair in cross:
        layer = DynamicLayer()
        if pair is not None:
            layer.lazy_initialization(*pair)
            layer.keys, layer.values = pair
        layers.append(layer)
    projected = DynamicCache()
    projected.layers = layers
    return EncoderDecoderCache(DynamicCache(), projected)


@contextlib.contextmanager
def recording_layer_calls(model: torch.nn.Module, stack: LayerStack | EncoderStack) -> Iterator[Callable[[int, Any, list], Any]]:
    """Full passes that also record each layer's call (hidden state first) for the current batch; for an
    encoder-decoder also the last encoder layer's output, as one more call ``((output,), {})``."""
    last = stack.layers[-1] if isinstance(stack, EncoderStack) else None

    def install() -> list:
        handles = [layer.register_forward_pre_hook(_record_hook, with_kwargs=True) for layer in stack.layers]
        return handles + ([last.register_forward_hook(_record_output_hook)] if last is not None else [])

    def run(i: int, batch, recorded: list) -> Any:
        calls: list = [None] * _starts(stack)
        active = {id(layer): (j, calls) for j, layer in enumerate(stack.layers)}
        if last is not None:
            active[("output", id(last))] = (len(stack.layers), calls)
        token = _RECORDING.set(active)
        try:
            outputs = model(**batch.inputs)
        finally:
            _RECORDING.reset(token)
        recorded.append(calls)
        return outputs

    with shared_hooks(model, "layer_inputs", install):
        yield run


def _record_output_hook(module: torch.nn.Module, args: tuple, output: Any) -> None:
    active = _RECORDING.get()
    if active is not None and ("output", id(module)) in active:
        index, calls = active[("output", id(module))]
        calls[index] = ((output[0] if isinstance(output, tuple) else output,), {})


def run_layers(stack: LayerStack | EncoderStack, start: int, hidden: torch.Tensor, calls: list, computed: dict,
               n_examples: int) -> torch.Tensor:
    """The last layer's output ``[B, T, H]`` of layers ``start ..`` on one batch whose input to layer ``start`` is
    ``hidden``; the inputs of the later layers go into ``computed``."""
    if hidden.shape[0] != n_examples:
        raise RuntimeError(f"cached layer input of {hidden.shape[0]} examples for a batch of {n_examples}")
    for layer in range(start, len(stack.layers)):
        if layer > start:
            computed.setdefault(layer, []).append(hidden)
        args, kwargs = calls[layer]
        out = stack.layers[layer](hidden, *args, **kwargs)
        hidden = out[0] if isinstance(out, tuple) else out          # [B, T, H]
    return hidden


def run_from_layer(stack: LayerStack, start: int, hidden: torch.Tensor, calls: list, computed: dict,
                   n_examples: int) -> torch.Tensor:
    """The logits ``[B, classes]`` of layers ``start ..`` and the head on one batch whose input to layer
    ``start`` is ``hidden`` ``[B, T, H]``; the inputs of the later layers go into ``computed``."""
    return stack.head(run_layers(stack, start, hidden, calls, computed, n_examples))
