"""What a script's `--help` prints: its docstring (what it does, with its example command on
top), then its flags in groups: the script's own first (the original's flags among them), then
the fine-tuning flags every fine-tuning script shares, then the training flags every training
script shares. `--helpfull` is absl's list of every flag, its own included.

    @flag_group(FINETUNING)
    def define_monitoring_flags(): ...      # the flags it defines are listed under FINETUNING

    print(help_text("bert_realformer.cli.run_classifier", __doc__))
"""

import functools

from absl import flags

FINETUNING = "fine-tuning flags (the same in every fine-tuning script)"
TRAINING = "training flags (the same in every training script)"
_ORDER = (FINETUNING, TRAINING)
# group title -> the names of the flags defined in it (`flag_group`), in this process.
_GROUPS: dict[str, list[str]] = {}


def flag_group(title: str):
    """Decorates a function that defines flags: the flags it defines are listed under `title`."""
    def decorate(define):
        @functools.wraps(define)
        def defining(*args, **kwargs):
            before = set(flags.FLAGS)
            result = define(*args, **kwargs)
            _GROUPS.setdefault(title, []).extend(name for name in flags.FLAGS if name not in before)
            return result
        return defining
    return decorate


def help_text(script_module: str, usage: str | None, width: int = 100) -> str:
    """The script's usage, then its flags as the module docstring says; a flag once, under its
    long name."""
    script = script_module.rsplit(".", 1)[-1] + ".py"
    grouped = {name for title in _ORDER for name in _GROUPS.get(title, ())}
    own = [flag for flag in flags.FLAGS.get_key_flags_for_module(script_module) if flag.name not in grouped]
    sections = [(f"{script}'s own flags", own)]
    sections += [(title, [flags.FLAGS[name] for name in _GROUPS[title]]) for title in _ORDER if _GROUPS.get(title)]
    lines = [(usage or "").strip(), ""]
    for title, group in sections:
        lines.append(f"{title}:")
        for flag in sorted({flag.name: flag for flag in group}.values(), key=lambda flag: flag.name):
            lines.extend(_flag_lines(flag, width))
        lines.append("")
    lines.append("--helpfull lists absl's own flags too (--verbosity, --flagfile, ...).")
    return "\n".join(lines)


def _flag_lines(flag, width: int) -> list[str]:
    name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    text = f"{name}: {flag.help}"
    if flag.default is not None:
        text += f" (default: {flag.default_as_str})"
    return [flags.text_wrap(text, width, indent="      ", firstline_indent="  ")]
