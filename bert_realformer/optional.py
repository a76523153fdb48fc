"""The optional dependencies, the package's extras (`pip install 'bert-realformer[chinese]'`):
imported where a run needs one, and named in one line with the extra to install when missing.

    jieba = optional.require("jieba", "--chinese_word_segmentation=jieba")
"""

from __future__ import annotations

import importlib
from types import MappingProxyType, ModuleType

from bert_realformer.errors import InputError

# {module: the extra that installs it}
EXTRAS = MappingProxyType({"jieba": "chinese", "matplotlib": "plots"})


def require(module: str, purpose: str) -> ModuleType:
    """`module` imported; an `InputError` saying that `purpose` needs it and which extra installs
    it when it is not installed."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != top:  # (the module is there; something it imports is not)
            raise
        raise InputError(f"{purpose} needs {top}, which is not installed: pip install "
                         f"'bert-realformer[{EXTRAS[top]}]'") from None


def pyplot(purpose: str) -> ModuleType:
    """matplotlib's `pyplot` drawing to files (the Agg backend, no display), as `require` imports it."""
    matplotlib = require("matplotlib", purpose)
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", purpose)
