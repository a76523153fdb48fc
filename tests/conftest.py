import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@pytest.fixture
def data_dir():
    return DATA


@pytest.fixture
def float32_policy():
    """Restores the global dtype policy after a test that changes it."""
    import keras
    previous = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(previous)
