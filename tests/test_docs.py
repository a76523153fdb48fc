"""The documentation says what the code does: the flag reference is what the scripts' flags
generate, every command in README.md and docs/ uses flags and values its script accepts,
BENCHMARKS.md and README's summary are what bench/results gives, and the pages stay the size of
pages a reader reads."""

import pathlib
import re
import signal
import sys

import pytest

from bert_realformer.commandline import runner
from bert_realformer.errors import Diverged
from tools import doc_commands, flag_reference, message_reference

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import benchmarks_report  # noqa: E402


@pytest.fixture(scope="module")
def all_flags():
    return flag_reference.read_flags()


def test_the_flag_reference_is_what_the_flags_generate(all_flags):
    assert flag_reference.differences(flag_reference.render(all_flags)) == [], "run make docs"


def test_every_flag_of_every_script_is_in_the_reference(all_flags):
    assert set(all_flags) == {path.stem for path in (ROOT / "bert_realformer" / "cli").glob("*.py")} - {"__init__"}
    missing = []
    for script, defined in all_flags.items():
        pages = [script] + [page for page, members in flag_reference.SHARED_PAGES.items() if script in members]
        text = "".join((ROOT / "docs" / "flags" / f"{page}.md").read_text(encoding="utf-8") for page in pages)
        missing += [f"{script}: --{flag.name}" for flag in defined
                    if not flag.builtin and f"| `--{flag.name}` |" not in text]
    assert not missing, missing
    assert len({flag.name for defined in all_flags.values() for flag in defined if not flag.builtin}) > 120


def test_every_documented_command_uses_flags_its_script_defines(all_flags):
    commands, problems = doc_commands.check_documents(flags_by_script=all_flags)
    assert problems == []
    # The checker saw the commands: the README's recipes and every guide's.
    sources = {command.where.split(":")[0] for command in commands}
    assert {"README.md", "docs/classification.md", "docs/continued-pretraining.md", "docs/other-tasks.md",
            "docs/serving.md", "docs/distributed.md", "docs/checkpoints.md",
            "bert_realformer/cli/run_classifier.py", "bert_realformer/cli/run_squad.py"} <= sources  # (--help)
    scripts = {command.script for command in commands if command.where.startswith("README.md")}
    assert {"run_classifier", "run_pretraining", "create_pretraining_data", "extend_vocabulary",
            "convert_checkpoint"} <= scripts


PLANTED = """Some prose naming `run_ner.py --use_crf` and `--window_pooling=median`.

```bash
bert-run-classifier --task_name=generic --data_dir=$DATA --output_dir=out \\
  --bert_config_file=$CKPT/bert_config.json --vocab_file=$CKPT/vocab.txt --learning_rate=-1 \\
  --truncation=middle --do_train --nodo_eval --nodo_nothing
python convert_checkpoint.py --from=tf1 --input=$CKPT
bert-run-ner --task_name=conll2003 --data_dir=d --output_dir=o --vocab_file=vocab.txt \\
  --bert_config_file=$CKPT/bert_config.json --init_checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt
python run_pretraining.py --bert_config_file=c.json --input_file=x --output_dir=o --num_train_steps=ten
```
"""


def test_a_planted_wrong_flag_or_value_is_found(all_flags):
    commands, unreadable = doc_commands.commands_in(PLANTED, "planted.md", list(all_flags))
    assert not unreadable
    found = doc_commands.problems(commands, all_flags)
    assert found == [
        "planted.md:1: run_ner.py: no flag --use_crf",
        "planted.md:1: `--window_pooling=median`: --window_pooling=median: expected one of auto, max, mean, first",
        "planted.md:4: run_classifier.py: --learning_rate=-1: must be greater than 0",
        "planted.md:4: run_classifier.py: --truncation=middle: expected one of head, tail, head_tail",
        "planted.md:4: run_classifier.py: no flag --nodo_nothing",
        "planted.md:7: convert_checkpoint.py: --to, --output are required",
        "planted.md:8: run_ner.py: --vocab_file=vocab.txt is not beside "
        "--init_checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt: name the checkpoint's own file",
        "planted.md:10: run_pretraining.py: --num_train_steps=ten: expected an integer",
    ]
    # Placeholders are not values to check; a correct command has no problem.
    fine = "```bash\nbert-run-squad --train_file=$DATA/train.json --doc_stride=N --output_dir=out " \
           "--vocab_file=v --bert_config_file=c --nodo_lower_case\n```\n"
    assert doc_commands.problems(doc_commands.commands_in(fine, "fine.md", list(all_flags))[0], all_flags) == []


def test_benchmarks_and_the_readme_summary_are_generated_from_the_json():
    assert (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8") == benchmarks_report.benchmarks(), "run make docs"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert benchmarks_report.readme_with_summary(readme) == readme, "run make docs"


def test_each_benchmark_table_names_its_hardware_and_its_reports():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    sections = text.split("\n## ")[1:]
    assert len(sections) >= 10
    for section in sections:
        heading = section.splitlines()[0]
        assert re.search(r"AMD EPYC|Intel Xeon|NVIDIA", section), heading
        assert "bench/results/" in section and ".json" in section, heading
    for name in re.findall(r"\(bench/results/([^)]+\.json)\)", text):
        assert (ROOT / "bench" / "results" / name).is_file(), name


def test_the_pages_stay_pages():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 250 and len(benchmarks) <= 800
    assert not [line for line in benchmarks if line.startswith("#") and re.search(r"20\d\d-\d\d-\d\d", line)]
    # Every guide is in the README's index, and every link between pages leads to a page.
    index = "\n".join(readme)
    guides = sorted(path.name for path in (ROOT / "docs").glob("*.md"))
    assert [name for name in guides if f"docs/{name}" not in index] == []
    for page in [ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#:]*\.md)?(?:#([^)]*))?\)", page.read_text(encoding="utf-8")):
            linked = (page.parent / target).resolve() if target else page
            assert linked.is_file(), f"{page.name} links to {target}"
            if anchor:
                headings = [line.lstrip("#").strip() for line in linked.read_text(encoding="utf-8").splitlines()
                            if line.startswith("#")]
                assert anchor in {_anchor(heading) for heading in headings}, f"{page.name} links to {target}#{anchor}"


def _anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_").replace(" ", "-")


def test_the_troubleshooting_page_has_every_ending():
    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    statuses = {2, Diverged.exit_code, runner.DISK_FULL_STATUS, runner.OUT_OF_MEMORY_STATUS, runner.LOST_WORKER_STATUS,
                runner.PERMISSION_STATUS, 128 + signal.SIGINT, 128 + signal.SIGTERM}
    table = text[:text.index("\n## ")]
    assert [status for status in sorted(statuses) if not re.search(rf"\b{status}\b", table)] == []
    endings = ("error: no space left on the device", "error: out of memory", "error: lost contact with another worker",
               "error: permission denied", "error: stopped by SIGTERM", "error: interrupted (SIGINT)",
               "error: training diverged at step", "is in use by", ": must be", "is required",
               "Unknown command line flag", "cannot be written", "truncated record at offset",
               "warning: this run looks stuck")
    assert [ending for ending in endings if ending not in text] == []


def test_the_troubleshooting_page_lists_every_message_the_code_says():
    """Its last section is what tools/message_reference.py reads from the code (make docs), and
    that reading finds the lines of each kind: raised, logged, printed."""
    found = message_reference.messages()
    assert message_reference.page_text(found) == (ROOT / "docs" / "troubleshooting.md").read_text(
        encoding="utf-8"), "run make docs"
    every = [line for lines in found.values() for line in lines]
    for line in ("error: --{name}={given}: no such file",  # raised, its options as flags
                 "warning: --vocab_file=%s has %d lines but the model's vocab_size is %d: the model's last %d "
                 "tokens can never be produced from text (an extended model's vocabulary is the one made with it)",
                 "error: interrupted (SIGINT); {INTACT}"):  # logged; printed
        assert line in every, line


# A time (`20.8 ms`, `4.10 steps/s`), a measured ratio (`1.21-1.48x`, `2.1x`, `2-3x faster`).
TIMING = re.compile(r"\b\d+(\.\d+)?\s?(ms|steps/s|examples/s|tokens/s|lines/s)\b|\b\d+\.\d+(-\d+\.\d+)?x\b"
                    r"|\b\d+(-\d+)?x (faster|slower)")


def test_no_library_comment_or_docstring_quotes_a_timing():
    """A measurement lives in bench/results and BENCHMARKS.md; the code cites its section."""
    found = []
    for package in ("bert_realformer", "modeling", "tokenization"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if TIMING.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_layout_names_every_module_and_only_modules_that_exist():
    """docs/layout.md has a line per module: a module added, moved or removed shows here. A
    table under a package's heading (`bert_realformer/tasks/`) names its modules from
    that package; a path from the top (`modeling/bert.py`) stands as it is."""
    packages = ("bert_realformer/", "modeling/", "tokenization/")
    named, package = set(), ""
    for line in (ROOT / "docs" / "layout.md").read_text().splitlines():
        if line.startswith("## "):
            heading = re.match(r"## `([\w/]+/)`", line)
            package = heading.group(1) if heading else ""
        elif cell := re.match(r"\| `([\w/.]+\.py)` \|", line):
            path = cell.group(1)
            named.add(path if path.startswith(packages) else package + path)
    modules = {str(path.relative_to(ROOT)) for top in packages for path in (ROOT / top).rglob("*.py")
               if path.name != "__init__.py"}
    assert sorted(modules - named) == [], "modules docs/layout.md does not name"
    assert sorted(named - modules) == [], "modules docs/layout.md names that do not exist"
