"""Every weight format the project reads and writes, in one layer between the model and
training, each behind one interface (`formats.WeightFormat`: read, write, names; found by name
in `formats`): TF1 name-based checkpoints (`tf1`: the released checkpoints and every run's
`model.ckpt-N`), Hugging Face directories (`huggingface`), KerasHub presets (`kerashub`), the
training states runs resume from and which weights a run starts from (`training_states`); and
conversion between them (`conversion`). The names come from the model classes
(`modeling.tf1_variable_map`); `modeling` itself reads no weights.

    from bert_realformer import checkpoints
    report = checkpoints.load_tf1_checkpoint(model, "uncased_L-12_H-768_A-12/bert_model.ckpt")
    checkpoints.save_tf1_checkpoint(model, "out/bert_model.ckpt")
    model = checkpoints.from_pretrained("hf_dir", task="classifier", num_labels=3)  # any format (`pretrained`)
"""

import importlib
import types

# name -> the module that defines it. Imported on first use (a module `__getattr__`), so that the
# package's TensorFlow-free modules (`formats`, `config_files`, `files_beside`, `bundle_index`) import without it:
# a script checks its flags and the checkpoint's files before TensorFlow starts.
_MODULE_OF = types.MappingProxyType({
    "from_pretrained": "pretrained",
    **dict.fromkeys(("CheckpointError", "DamagedCheckpoint", "LoadReport", "assign_named_values", "checkpoint_keys",
                     "load_tf1_checkpoint", "read_checkpoint_tensors", "read_tf1_checkpoint", "reading_checkpoint",
                     "resolve_checkpoint_path", "save_tf1_checkpoint", "write_tf1_checkpoint"), "tf1"),
})
__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
