# `make test`: create .venv/ if missing, install the pinned dependencies, run the test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip download --quiet --no-deps --no-binary :all: vaderSentiment==3.3.2 -d $(VENV)/data
	touch $(STAMP)

test: $(STAMP)
	REQUIRE_REAL_DATA=1 $(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache
