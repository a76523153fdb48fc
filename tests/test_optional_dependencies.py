"""The extras: a run that needs jieba or matplotlib without them stops in one line naming the
extra that installs it (the wheel journey checks it in an environment without them); a module
that is there but fails to import is not said to be missing."""

import sys

import pytest

from bert_realformer import optional
from bert_realformer.errors import InputError
from tokenization.chinese import JiebaSegmenter, continues_word


def test_jieba_missing_names_the_chinese_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # (an import of it then fails as if not installed)
    with pytest.raises(InputError) as raised:
        JiebaSegmenter()
    assert str(raised.value) == ("--chinese_word_segmentation=jieba needs jieba, which is not installed: "
                                 "pip install 'bert-realformer[chinese]'")


def test_matplotlib_missing_names_the_plots_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(InputError, match=r"^the figures needs matplotlib, which is not installed: pip install "
                                         r"'bert-realformer\[plots\]'$"):
        optional.pyplot("the figures")


def test_an_installed_module_that_fails_inside_is_not_called_missing(monkeypatch, tmp_path):
    (tmp_path / "jieba.py").write_text("import a_module_jieba_lacks\n")
    monkeypatch.delitem(sys.modules, "jieba", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_module_jieba_lacks"):
        optional.require("jieba", "segmentation")


def test_with_the_extras_installed_they_import():
    assert optional.pyplot("the figures").get_backend().lower() == "agg"
    marked = JiebaSegmenter()("我们去公园", ["我", "们", "去", "公", "园"])  # jieba: 我们 / 去 / 公园
    assert [continues_word(token) for token in marked] == [False, True, False, False, True]
