"""The helper functions of the original `modeling.py` that users' code calls, on Keras 3 ops:
`get_shape_list`, `assert_rank`, `reshape_to_matrix`, `reshape_from_matrix` and
`get_assignment_map_from_checkpoint` (for this project's TF1 names). `create_initializer`,
`get_activation` and `gelu` live in `layers` and `activations`."""

import collections
from collections.abc import Sequence

import keras
from keras import ops


def assert_rank(tensor, expected_rank: int | Sequence[int], name: str | None = None) -> None:
    """A `ValueError` naming the tensor, its rank and shape and the expected rank(s) when the
    rank of `tensor` is not `expected_rank` (an int or a list of allowed ranks)."""
    allowed = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    shape = tuple(tensor.shape)
    if len(shape) not in allowed:
        expected = " or ".join(str(r) for r in sorted(allowed))
        raise ValueError(f"{name or 'the tensor'} must have rank {expected}, got rank {len(shape)} "
                         f"(shape {list(shape)})")


def get_shape_list(tensor, expected_rank: int | Sequence[int] | None = None, name: str | None = None) -> list:
    """The shape as a list: Python ints where the size is static, scalar tensors where it is
    dynamic (inside a traced function with unknown dimensions)."""
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    static = list(tensor.shape)
    if all(dim is not None for dim in static):
        return [int(dim) for dim in static]
    dynamic = ops.shape(tensor)
    return [int(dim) if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def reshape_to_matrix(tensor):
    """[..., width] -> [-1, width] (a matrix as is); rank below 2 is a `ValueError`."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(f"reshape_to_matrix needs rank 2 or more, got rank {len(shape)} (shape {list(shape)})")
    return tensor if len(shape) == 2 else ops.reshape(tensor, (-1, shape[-1]))


def reshape_from_matrix(matrix, orig_shape_list: Sequence):
    """[-1, width] back to `orig_shape_list[:-1] + [width]` (what `reshape_to_matrix` undid)."""
    if len(orig_shape_list) == 2:
        return matrix
    return ops.reshape(matrix, (*orig_shape_list[:-1], get_shape_list(matrix)[-1]))


def get_assignment_map_from_checkpoint(model_or_variables, init_checkpoint: str):
    """(assignment map {checkpoint name: variable name}, {name: 1 and name:0: 1} of the
    variables the checkpoint has), as the original returns for `tf.train.init_from_checkpoint`:
    here for a model of `modeling` (its TF1 names, `tf1_variable_map`) or a list of variables
    named with TF1 names."""
    from modeling.checkpoints import checkpoint_keys, resolve_checkpoint_path, tf1_variable_map
    if isinstance(model_or_variables, keras.Model):
        names = list(tf1_variable_map(model_or_variables))
    else:
        names = [getattr(v, "path", None) or v.name.split(":")[0] for v in model_or_variables]
    available = set(checkpoint_keys(resolve_checkpoint_path(init_checkpoint)))
    assignment_map = collections.OrderedDict((name, name) for name in names if name in available)
    initialized = {}
    for name in assignment_map:
        initialized[name] = 1
        initialized[f"{name}:0"] = 1
    return assignment_map, initialized
