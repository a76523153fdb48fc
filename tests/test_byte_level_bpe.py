"""Byte-level BPE (RoBERTa's, GPT-2's): by hand on a tiny vocabulary, and exact against the Rust
`tokenizers` library (the reference implementation) on thousands of real English and Chinese
lines it did not train on."""

import json

import pytest

from tokenization.byte_level_bpe import ByteLevelBPETokenizer, byte_characters, pieces


def test_every_byte_has_a_printable_character_and_the_space_is_g_dot():
    characters = byte_characters()
    assert len(set(characters)) == 256
    assert characters[0x20] == "Ġ" and characters[0x0A] == "Ċ" and characters[ord("a")] == "a"
    assert all(c.isprintable() and not c.isspace() for c in characters)


def test_pieces_and_merges_by_hand(tmp_path):
    assert pieces("Hello, world's  2024 café!\n") == ["Hello", ",", " world", "'s", " ", " 2024", " café", "!", "\n"]
    merges = ["#version: 0.2", "l l", "h e", "he ll", "Ġ w", "o r", "Ġw or", "hell o"]
    vocab = {token: i for i, token in enumerate(["h", "e", "l", "o", "Ġ", "w", "r", "d", "ll", "he", "hell", "Ġw",
                                                  "or", "Ġwor", "hello"])}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("\n".join(merges) + "\n")
    tokenizer = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    # "hello": l+l first (rank 0), then h+e, he+ll, hell+o; " world": Ġ+w, o+r, Ġw+or, then d.
    assert tokenizer.tokenize("hello world") == ["hello", "Ġwor", "l", "d"]
    assert tokenizer.convert_tokens_to_ids(["hello", "Ġwor", "l", "d"]) == [14, 13, 2, 7]
    assert tokenizer.decode(["hello", "Ġwor", "l", "d"]) == "hello world"
    prefixed = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"),
                                     add_prefix_space=True)
    assert prefixed.tokenize("world") == ["Ġwor", "l", "d"]
    # A word of a sentence given as words has the space before it, as transformers' add_prefix_space gives it.
    assert tokenizer.tokenize_word("world") == ["Ġwor", "l", "d"] == tokenizer.tokenize_word(" world")


@pytest.mark.slow  # (trains the reference vocabulary)
def test_the_tokens_are_the_tokenizers_librarys_on_real_lines(tmp_path, real_data):
    tokenizers = pytest.importorskip("tokenizers")
    english, chinese = real_data.english_sentences(), real_data.peoples_daily_lines()
    reference = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
    reference.train_from_iterator(english[:8000] + chinese[:2000], vocab_size=3000, min_frequency=2,
                                  show_progress=False)
    reference.save_model(str(tmp_path), "bpe")
    ours = ByteLevelBPETokenizer(str(tmp_path / "bpe-vocab.json"), str(tmp_path / "bpe-merges.txt"))
    lines = english[8000:11000] + chinese[2000:3000] + ["  two  spaces\tand a tab\n", "it's we'll they'd",
                                                        "naïve café 123 4.5", "emoji 😀 ok", ""]
    for line in lines:
        encoded = reference.encode(line)
        assert ours.tokenize(line) == encoded.tokens, line
        assert ours.convert_tokens_to_ids(encoded.tokens) == encoded.ids
        assert ours.decode(encoded.tokens) == line


def test_a_savedmodel_of_text_is_refused_for_a_bpe_vocabulary_in_one_line(tmp_path):
    """Byte-level BPE has no TensorFlow op: the graph tokenizer is refused naming the file, and
    run_classifier.py --export_dir with such a vocabulary stops before any work."""
    import os
    import sys

    from helpers import script_processes

    from bert_realformer.errors import InputError
    from tokenization.vocabularies import graph_tokenizer_for
    tokens = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", *byte_characters()]
    (tmp_path / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(tokens)}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(InputError, match="byte-level BPE has no TensorFlow op"):
        graph_tokenizer_for(str(tmp_path / "vocab.json"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.tsv").write_text("text\tlabel\na b\t0\nc d\t1\n")
    (tmp_path / "bert_config.json").write_text(json.dumps({
        "vocab_size": len(tokens), "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 16}))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    refused = script_processes.run(
        [sys.executable, os.path.join(root, "run_classifier.py"), "--task_name=generic",
         f"--data_dir={tmp_path}/data", f"--vocab_file={tmp_path}/vocab.json",
         f"--bert_config_file={tmp_path}/bert_config.json", f"--output_dir={tmp_path}/out", "--do_train",
         f"--export_dir={tmp_path}/export", "--max_seq_length=8"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: --export_dir={tmp_path}/export: a SavedModel tokenizes its text in the graph, and "
        f"--vocab_file={tmp_path}/vocab.json is byte-level BPE, which has no TensorFlow op; run without "
        "--export_dir and serve token ids")
    assert "step 1" not in refused.stderr and not list((tmp_path / "export").glob("*"))  # (no version written)


@pytest.mark.parametrize("content", ['{"a": 0, "b"', '["a", "b"]'], ids=["truncated", "not-an-object"])
def test_a_damaged_vocabulary_is_one_error_naming_it(tmp_path, content):
    from bert_realformer.errors import InputError
    from tokenization.vocabularies import tokenizer_for
    (tmp_path / "vocab.json").write_text(content)
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(InputError, match=rf"^{tmp_path}/vocab.json: expected a byte-level BPE vocabulary, a JSON "
                                         "object of token: id"):
        tokenizer_for(str(tmp_path / "vocab.json"))
