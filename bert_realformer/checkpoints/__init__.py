"""Every weight format the project reads and writes, in one layer between the model and
training, each behind one interface (`formats.WeightFormat`: read, write, names; found by name
in `formats`): TF1 name-based checkpoints (`tf1`: the released checkpoints and every run's
`model.ckpt-N`), Hugging Face directories (`huggingface`), KerasHub presets (`kerashub`), the
training states runs resume from and which weights a run starts from (`training_states`); and
conversion between them (`conversion`). The names come from the model classes
(`modeling.tf1_variable_map`); `modeling` itself does no file I/O.

    from bert_realformer import checkpoints
    report = checkpoints.load_tf1_checkpoint(model, "uncased_L-12_H-768_A-12/bert_model.ckpt")
    checkpoints.save_tf1_checkpoint(model, "out/bert_model.ckpt")
    model = checkpoints.from_pretrained("hf_dir", task="classifier", num_labels=3)  # any format (`pretrained`)
"""

from bert_realformer.checkpoints.tf1 import (
    CheckpointError,
    DamagedCheckpoint,
    LoadReport,
    assign_named_values,
    checkpoint_keys,
    load_tf1_checkpoint,
    read_checkpoint_tensors,
    read_tf1_checkpoint,
    reading_checkpoint,
    resolve_checkpoint_path,
    save_tf1_checkpoint,
    write_tf1_checkpoint,
)

__all__ = ["from_pretrained", "CheckpointError", "DamagedCheckpoint", "LoadReport", "assign_named_values",
           "checkpoint_keys", "load_tf1_checkpoint", "read_checkpoint_tensors",
           "read_tf1_checkpoint", "reading_checkpoint", "resolve_checkpoint_path", "save_tf1_checkpoint",
           "write_tf1_checkpoint"]


def __getattr__(name):
    # `from_pretrained` on first use: its module imports TensorFlow, which the rest of this
    # package imports only inside the functions that need it.
    if name == "from_pretrained":
        from bert_realformer.checkpoints.pretrained import from_pretrained
        return from_pretrained
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
