"""The fine-tuning tasks by name. A task subpackage registers its `FinetuningTask` in its `task`
module; `get` imports the project's own ones on first use, so a script needs only the name.

    @registry.register("ner")
    class NerTask(FinetuningTask): ...

    task_class = registry.get("ner")
"""

from __future__ import annotations

import importlib

from bert_realformer.finetuning.contract import FinetuningTask

# name -> task class. Written only by `register` (at the import of a task module), read by `get`.
TASKS: dict[str, type[FinetuningTask]] = {}


def register(name: str):
    """A class decorator registering a `FinetuningTask` under `name` (a name is taken once)."""

    def add(task_class: type[FinetuningTask]) -> type[FinetuningTask]:
        if not issubclass(task_class, FinetuningTask):
            raise TypeError(f"{task_class.__name__} is not a FinetuningTask")
        if TASKS.get(name, task_class) is not task_class:
            raise ValueError(f"a task named {name!r} is registered already ({TASKS[name].__name__})")
        TASKS[name] = task_class
        return task_class

    return add


def get(name: str) -> type[FinetuningTask]:
    """The task class registered as `name`; the project's own tasks (`bert_realformer.tasks.NAME`)
    are imported here when they are not yet. A `KeyError` naming the registered ones else."""
    if name not in TASKS:
        try:
            importlib.import_module(f"bert_realformer.tasks.{name}.task")
        except ModuleNotFoundError as error:
            if not (error.name or "").startswith(f"bert_realformer.tasks.{name}"):
                raise
    if name not in TASKS:
        raise KeyError(f"no fine-tuning task named {name!r}; registered: {', '.join(sorted(TASKS)) or 'none'}")
    return TASKS[name]
