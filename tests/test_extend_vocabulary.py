"""extend_vocabulary.py: a checkpoint of the 21128-token Chinese vocabulary grown by domain
tokens (the curly quotes that vocabulary lacks, English terms); old rows bit for bit, new rows
the mean of their old pieces, refusals before anything is written, and the result used by the
tokenizers, a fine-tuning run and both conversions."""

import json
import os

import numpy as np
import pytest
from helpers.conversions import convert
from helpers.in_process import completed_in_process, run_script
from helpers.minilm import minilm_dir

import modeling
from bert_realformer import checkpoints
from tokenization import FullTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_ZH = os.path.join(ROOT, "tests", "data", "tokenization", "vocab_zh.txt")
OLD = FullTokenizer(VOCAB_ZH).vocab
CONFIG = {"vocab_size": len(OLD), "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 32, "max_position_embeddings": 64, "type_vocab_size": 2, "hidden_act": "gelu",
          "initializer_range": 0.02, "directionality": "bidi"}
NEW_TOKENS = ["“", "”", "blockchain", "的", "“", "etf", "defi"]  # 的 and etf are there already; “ repeats


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A tiny checkpoint in the released layout (MLM and NSP heads, Adam slots beside them)."""
    directory = tmp_path_factory.mktemp("released")
    model = modeling.BertPretrainer(modeling.BertConfig.from_dict(CONFIG))
    model.build()
    values = {name: np.asarray(v) for name, v in modeling.tf1_variable_map(model).items()}
    rng = np.random.default_rng(0)
    values["cls/predictions/output_bias"] = rng.normal(size=len(OLD)).astype("float32")
    slots = {f"{name}/adam_m": np.zeros_like(v) for name, v in values.items()}
    checkpoints.write_tf1_checkpoint({**values, **slots, "global_step": np.int64(7)},
                                  str(directory / "bert_model.ckpt"))
    (directory / "bert_config.json").write_text(json.dumps(CONFIG))
    return directory, values


def _extend(released_dir, tokens_file, output_dir, *flags):
    return run_script("extend_vocabulary.py", f"--vocab_file={VOCAB_ZH}",
                      f"--bert_config_file={released_dir}/bert_config.json",
                      f"--init_checkpoint={released_dir}/bert_model.ckpt", f"--new_tokens={tokens_file}",
                      f"--output_dir={output_dir}", *flags)


@pytest.fixture(scope="module")
def extended(released, tmp_path_factory):
    released_dir, _ = released
    directory = tmp_path_factory.mktemp("extended")
    tokens = directory / "tokens.txt"
    tokens.write_text("\n".join(NEW_TOKENS) + "\n\n", encoding="utf-8")
    status, stderr = _extend(released_dir, tokens, directory / "out")
    assert status == 0, stderr
    return directory / "out", stderr


def test_old_rows_unchanged_new_rows_the_mean_of_their_pieces(released, extended):
    _, before = released
    out, stderr = extended
    after = checkpoints.read_tf1_checkpoint(str(out / "bert_model.ckpt"))
    assert after.keys() == before.keys()  # no Adam slots, no global_step
    n = len(OLD)
    for name, value in before.items():
        if name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
            np.testing.assert_array_equal(after[name][:n], value, err_msg=name)
            assert after[name].shape[0] == n + 4 and after[name].dtype == value.dtype
        else:
            np.testing.assert_array_equal(after[name], value, err_msg=name)
    written = (out / "vocab.txt").read_bytes()
    with open(VOCAB_ZH, "rb") as f:
        old = f.read()
    assert written[:len(old)] == old
    assert written[len(old):].decode("utf-8").split("\n") == ["“", "”", "blockchain", "defi", ""]
    config = json.loads((out / "bert_config.json").read_text())
    assert config == {**CONFIG, "vocab_size": n + 4}
    # Pieces by hand: blockchain -> block ##chain (or what the old vocabulary has), quotes -> [UNK].
    old_tokenizer = FullTokenizer(VOCAB_ZH)
    for offset, token in enumerate(["“", "”", "blockchain", "defi"]):
        pieces = old_tokenizer.convert_tokens_to_ids(old_tokenizer.tokenize(token))
        for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
            expected = before[name][pieces].astype(np.float64).mean(axis=0).astype(np.float32)
            np.testing.assert_allclose(after[name][n + offset], expected, rtol=1e-6, err_msg=f"{token} {name}")
    embeddings = "bert/embeddings/word_embeddings"
    np.testing.assert_array_equal(after[embeddings][n], before[embeddings][OLD["[UNK]"]])
    assert len(old_tokenizer.tokenize("blockchain")) > 1
    assert "skipped, already in the vocabulary: 的 “ etf" in stderr
    assert "starting from [UNK]'s row" in stderr and "“ ”" in stderr and "optimizer slots left out" in stderr


def test_both_tokenizers_keep_each_new_token_whole(extended):
    import tensorflow as tf

    from tokenization.fast import FastTokenizer
    out, _ = extended
    text = "他说：“比特币的blockchain和DeFi”。"
    reference = FullTokenizer(str(out / "vocab.txt"))
    ids = reference.tokenize_to_ids(text)
    n = len(OLD)
    assert [i - n for i in ids if i >= n] == [0, 2, 3, 1]
    fast = FastTokenizer(str(out / "vocab.txt"))
    assert fast.tokenize(tf.constant([text])).to_list()[0] == ids


def test_tokens_all_present_already_add_none_and_say_so(released, tmp_path):
    released_dir, _ = released
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("的\netf\n", encoding="utf-8")
    status, stderr = _extend(released_dir, tokens, tmp_path / "out")
    assert status == 0, stderr
    assert f"added no tokens (vocab_size stays {len(OLD)}); skipped, already in the vocabulary: 的 etf" in stderr


@pytest.mark.parametrize("line, message", [
    ("区块链", "'区块链' cannot be one token: the tokenizer splits every CJK character"),
    ("e-commerce", "'e-commerce' cannot be one token: the tokenizer splits it into e - commerce"),
    ("Bitcoin", "'Bitcoin' cannot be one token: the tokenizer sees it as 'bitcoin'"),
    ("##chain", "continuation pieces (##...) cannot be added"),
    ("big data", "'big data' holds whitespace"),
])
def test_refused_tokens_stop_before_anything_is_written(released, tmp_path, line, message):
    released_dir, _ = released
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"defi\n{line}\n", encoding="utf-8")
    status, stderr = _extend(released_dir, tokens, tmp_path / "out")
    assert status == 2
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {tokens}:2: ") and message in last, last
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case, message", [
    ("no_tokens_file", "--new_tokens={d}/missing.txt: no such file"),
    ("empty_tokens", "--new_tokens={d}/tokens.txt: holds no token"),
    ("no_vocab", "--vocab_file={d}/none.txt: no such file"),
    ("no_checkpoint", "{d}/nothing/bert_model.ckpt: no such file or directory"),
    ("wrong_config", "bert_model.ckpt: bert/embeddings/word_embeddings has shape [21128, 16] in the checkpoint "
                     "but [99, 16] in the model"),
])
def test_bad_inputs_are_one_line_with_nothing_written(released, tmp_path, case, message):
    released_dir, _ = released
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("" if case == "empty_tokens" else "defi\n", encoding="utf-8")
    flags = {"vocab_file": VOCAB_ZH, "bert_config_file": f"{released_dir}/bert_config.json",
             "init_checkpoint": f"{released_dir}/bert_model.ckpt", "new_tokens": str(tokens),
             "output_dir": str(tmp_path / "out")}
    if case == "no_tokens_file":
        flags["new_tokens"] = str(tmp_path / "missing.txt")
    elif case == "no_vocab":
        flags["vocab_file"] = str(tmp_path / "none.txt")
    elif case == "no_checkpoint":
        flags["init_checkpoint"] = str(tmp_path / "nothing" / "bert_model.ckpt")
    elif case == "wrong_config":
        (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "vocab_size": 99}))
        flags["bert_config_file"] = str(tmp_path / "config.json")
    status, stderr = run_script("extend_vocabulary.py", *(f"--{k}={v}" for k, v in flags.items()))
    assert status == 2
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message.format(d=tmp_path) in last, last
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_hugging_face_directory_extends_with_its_own_vocabulary_and_config(tmp_path):
    """The real all-MiniLM-L6-v2 directory as --init_checkpoint alone: its vocab.txt and config
    are the ones extended, its rows kept bit for bit, the result a TF1 release of its model."""
    source = minilm_dir()
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("blockchain\ndefi\n", encoding="utf-8")
    status, stderr = run_script("extend_vocabulary.py", f"--init_checkpoint={source}", f"--new_tokens={tokens}",
                                f"--output_dir={tmp_path / 'out'}")
    assert status == 0, stderr
    old = open(os.path.join(source, "vocab.txt"), encoding="utf-8").read().splitlines()
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").splitlines() == old + ["blockchain", "defi"]
    config = json.loads((tmp_path / "out" / "bert_config.json").read_text())
    assert config["vocab_size"] == len(old) + 2 and config["hidden_size"] == 384 and config["num_hidden_layers"] == 6
    from bert_realformer.checkpoints.pretrained import read_pretrained
    released, grown = read_pretrained(source).values, checkpoints.read_tf1_checkpoint(str(tmp_path / "out"))
    assert set(grown) == set(released)
    for name, value in released.items():
        rows = value.shape[0] if name == "bert/embeddings/word_embeddings" else None
        np.testing.assert_array_equal(grown[name][:rows], value, err_msg=name)
    assert grown["bert/embeddings/word_embeddings"].shape == (len(old) + 2, 384)


@pytest.mark.slow
def test_the_extended_checkpoint_fine_tunes_and_converts(extended, tmp_path):
    out, _ = extended
    data = tmp_path / "data"
    data.mkdir()
    rows = [("“比特币”涨了", "1"), ("DeFi“跌了”", "0"), ("blockchain“好”", "1"), ("今天下雨", "0")] * 4
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows),
                                           encoding="utf-8")
    result = completed_in_process("run_classifier.py", "--task_name=generic",
                             f"--data_dir={data}", f"--vocab_file={out}/vocab.txt",
                             f"--bert_config_file={out}/bert_config.json", f"--init_checkpoint={out}/bert_model.ckpt",
                             f"--output_dir={tmp_path}/run", "--do_train", "--do_eval", "--max_seq_length=16",
                             "--train_batch_size=4", "--num_train_epochs=1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "freshly initialised (not in it): output_weights, output_bias" in result.stderr
    n = len(OLD) + 4
    hf = convert("--from=tf1", "--to=hf", f"--input={out}/bert_model.ckpt", f"--output={tmp_path}/hf")
    assert hf.returncode == 0, hf.stderr[-2000:]
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["vocab_size"] == n
    assert (tmp_path / "hf" / "vocab.txt").read_text(encoding="utf-8").splitlines()[-1] == "defi"
    hub = convert("--from=tf1", "--to=kerashub", f"--input={out}/bert_model.ckpt", f"--output={tmp_path}/hub",
                  "--force")
    assert hub.returncode == 0, hub.stderr[-2000:]
    back = convert("--from=kerashub", "--to=tf1", f"--input={tmp_path}/hub", f"--output={tmp_path}/back")
    assert back.returncode == 0, back.stderr[-2000:]
    again = checkpoints.read_tf1_checkpoint(str(tmp_path / "back"))
    original = checkpoints.read_tf1_checkpoint(str(out / "bert_model.ckpt"))
    np.testing.assert_array_equal(again["bert/embeddings/word_embeddings"], original["bert/embeddings/word_embeddings"])
