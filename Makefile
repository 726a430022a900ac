# Two commands: `make run` (install, prepare the embedded default, start the dashboard)
# and `make test` (install if needed, prepare, run every test).
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install prepare browser speech clean-cache

$(STAMP): requirements.txt requirements-data.txt pyproject.toml assets/js.lock.json
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-data.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m app.webassets
	touch $(STAMP)

install: $(STAMP)

prepare: install
	$(BIN)/headprune prepare

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

test: prepare browser speech
	$(BIN)/python -m pytest -q -ra
