"""What every package and script of this project may import, and nothing here imports them:
the error types scripts end on, the one file I/O module and what is built on it (text files,
TFRecords without TensorFlow, run claims). Importing any of them changes nothing global.

`bert_realformer.from_pretrained(path, task=None, **task_args)` is the one loader of every weight
format (`checkpoints.pretrained`), named here as KerasHub's `from_preset` and transformers'
`from_pretrained` are; it is imported on first use, so `import bert_realformer` imports no
TensorFlow."""


def __getattr__(name: str):
    if name == "from_pretrained":
        from bert_realformer.checkpoints.pretrained import from_pretrained
        return from_pretrained
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
