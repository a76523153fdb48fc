"""The classification tasks by `--task_name`: `get_processor`."""

import types

from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.clue import (
    AfqmcProcessor,
    CmnliProcessor,
    CslProcessor,
    IflytekProcessor,
    OcnliProcessor,
    TnewsProcessor,
)
from bert_realformer.tasks.classification.glue import (
    ColaProcessor,
    MnliProcessor,
    MrpcProcessor,
    QnliProcessor,
    QqpProcessor,
    RteProcessor,
    Sst2Processor,
    StsbProcessor,
    WnliProcessor,
    XnliProcessor,
)
from bert_realformer.tasks.classification.own_files import GenericProcessor, ThucnewsProcessor
from bert_realformer.tasks.classification.reading import Processor

PROCESSORS = types.MappingProxyType({
    "cola": ColaProcessor, "sst-2": Sst2Processor, "sst2": Sst2Processor, "mrpc": MrpcProcessor,
    "qqp": QqpProcessor, "sts-b": StsbProcessor, "stsb": StsbProcessor, "mnli": MnliProcessor,
    "mnli-mm": lambda **_: MnliProcessor(mismatched=True), "qnli": QnliProcessor,
    "rte": RteProcessor, "wnli": WnliProcessor, "xnli": XnliProcessor,
    "tnews": TnewsProcessor, "iflytek": IflytekProcessor, "afqmc": AfqmcProcessor,
    "cmnli": CmnliProcessor, "ocnli": OcnliProcessor, "csl": CslProcessor,
    "thucnews": ThucnewsProcessor, "generic": GenericProcessor,
})


def get_processor(task_name: str, data_dir: str | None = None, **options) -> Processor:
    """The processor for `task_name` (case-insensitive). Options: `language` (xnli),
    `mismatched` (mnli), the generic-data options. Tasks whose labels come from the data
    (thucnews, generic) read them from `data_dir`."""
    name = (task_name or "").lower()
    if name not in PROCESSORS:
        raise InputError(f"task_name={task_name}: unknown task; known tasks: {', '.join(sorted(PROCESSORS))}",
                         options=("task_name",))
    factory = PROCESSORS[name]
    accepted = {"xnli": ("language",), "mnli": ("mismatched",),
                "generic": ("data_format", "text_a_column", "text_b_column", "label_column", "label_file")}
    kwargs = {k: v for k, v in options.items() if k in accepted.get(name, ()) and v is not None}
    processor = factory(**kwargs)
    if hasattr(processor, "set_labels_from") and data_dir is not None:
        processor.set_labels_from(data_dir)
    return processor
