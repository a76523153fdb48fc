"""The task contract (`finetuning.contract`, `tasks.registry`, `finetuning.flow`): a toy task written
as docs/adding-a-task.md says, in its own files only (tests/helpers/toy_task), is found by name
and trained, evaluated, kept at its best checkpoint and predicted by the one fine-tuning flow;
a second run in a new process's place (a new driver) predicts from that checkpoint alone."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer.finetuning import flow
from bert_realformer.finetuning.contract import FinetuningTask, TaskOptions
from bert_realformer.finetuning.schedule import Schedule
from bert_realformer.tasks import registry
from bert_realformer.training.driver import Driver, RunOptions
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = FullTokenizer(os.path.join(ROOT, "tests", "data", "tokenization", "vocab_en_uncased.txt"))
CONFIG = modeling.BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_position_embeddings=32, type_vocab_size=2)
ANIMALS = "cat dog horse bird cow sheep".split()
OTHERS = "the a on under near old warm red blue table chair road river house tree stone".split()


def _write_split(path, n, rng):
    lines = []
    for i in range(n):  # (every other text a list of animals: learnt in a few steps from scratch)
        words = rng.choice(ANIMALS if i % 2 else OTHERS, size=int(rng.integers(2, 9)))
        lines.append(f"{'yes' if i % 2 else 'no'}\t{' '.join(words)}\n")
    path.write_text("".join(lines))


def _make_driver(output_dir, training):
    def make(build_model):
        options = RunOptions(seed_globally=True,
                             output_dir=output_dir, seed=3, claim_output_dir=training, save_checkpoints_steps=20,
                             adam_bias_correction=True)
        driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: build_model(CONFIG), options,
                        stream=open(os.devnull, "w"))
        return driver, TOKENIZER
    return make


def test_a_task_in_its_own_files_is_found_by_name_and_run_by_the_one_flow(tmp_path, capsys):
    from helpers.toy_task.task import PREDICTIONS, ToyTask  # its import registers it
    assert registry.get("toy") is ToyTask
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    for split, n in (("train", 96), ("dev", 32), ("test", 24)):
        _write_split(data / f"{split}.txt", n, rng)
    out = str(tmp_path / "out")
    options = TaskOptions(output_dir=out, max_seq_length=16, eval_batch_size=8, predict_batch_size=8)
    plan = flow.Plan(do_train=True, do_eval=True, do_predict=True, eval_every_steps=6,
                     schedule=Schedule(16, 5e-3, 4.0, warmup_proportion=0.0, seed=12345))
    traces = []
    make_driver = _make_driver(out, training=True)

    def counting(build_model):
        driver, tokenizer = make_driver(build_model)
        traces.append(driver)
        return driver, tokenizer

    step = flow.run(registry.get("toy")(options, data_dir=str(data)), plan, counting)
    assert f"wrote {tmp_path / 'out' / PREDICTIONS}\n" in capsys.readouterr().err  # (where the predictions went)

    # Evaluated every 6 steps (24 steps: 4 epochs of 96 in batches of 16), the best kept by the
    # task's main metric, and the final evaluation is the best checkpoint's.
    history = [json.loads(line) for line in (tmp_path / "out" / "eval_history.jsonl").read_text().splitlines()]
    assert [point["step"] for point in history] == [6, 12, 18, 24]
    best = json.loads((tmp_path / "out" / "best" / "best.json").read_text())
    assert best["metric"] == "eval_accuracy" and best["value"] == max(p["eval_accuracy"] for p in history)
    results = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    assert int(results["global_step"]) == best["step"] == step
    assert float(results["eval_accuracy"]) == pytest.approx(best["value"]) and best["value"] >= 0.9
    # Every evaluation and the test predictions ran one traced prediction step.
    assert traces[0].prediction_traces == 1
    predicted = (tmp_path / "out" / PREDICTIONS).read_text().splitlines()
    assert len(predicted) == 24 and set(predicted) <= {"yes", "no"}

    # Prediction alone, with a new driver: the best checkpoint's predictions again.
    (tmp_path / "out" / PREDICTIONS).unlink()
    flow.run(ToyTask(options, data_dir=str(data)), flow.Plan(do_predict=True),
                   _make_driver(out, training=False))
    assert (tmp_path / "out" / PREDICTIONS).read_text().splitlines() == predicted


def test_the_registry_names_what_it_has_and_takes_a_name_once():
    assert registry.get("ner").__name__ == "NerTask"  # the project's own, imported on first use
    with pytest.raises(KeyError, match="no fine-tuning task named 'nothing'; registered: .*ner"):
        registry.get("nothing")

    class Other(FinetuningTask):
        pass

    with pytest.raises(ValueError, match="'ner' is registered already"):
        registry.register("ner")(Other)
    with pytest.raises(TypeError, match="not a FinetuningTask"):
        registry.register("plain")(dict)


@pytest.mark.parametrize("name", ["classification", "ner", "squad", "multiple_choice"])
def test_every_task_of_the_project_implements_the_whole_contract(name):
    task_class = registry.get(name)
    assert not task_class.__abstractmethods__
