"""The Transformer variants, in one place: a config's `layer_norm_type` and `residual_attention`
keys are read here and nowhere else by name (`BertConfig.variant`).

* post-LN: the original BERT, `LN(x + Attn(x))`, `LN(x + FFN(x))`.
* pre-LN: `x + Attn(LN(x))`, `x + FFN(LN(x))`, a final LayerNorm after the last layer.
* RealFormer (He et al. 2020): each layer's pre-softmax attention scores add the previous
  layer's (`residual_attention="sum"`), or their running mean (`"mean"`, the official code's
  `use_running_mean`). Either layer-norm placement can carry it.
"""

from __future__ import annotations

import dataclasses
import types

LAYER_NORM_TYPES = ("post", "pre")
RESIDUAL_ATTENTION_MODES = ("none", "sum", "mean")


@dataclasses.dataclass(frozen=True)
class Variant:
    """A config's variant: `layer_norm_type` ("post" | "pre") and `residual_attention`
    ("none" | "sum" | "mean")."""
    layer_norm_type: str = "post"
    residual_attention: str = "none"

    @property
    def pre_ln(self) -> bool:
        """LayerNorm before each sublayer (and after the last layer)."""
        return self.layer_norm_type == "pre"

    @property
    def is_realformer(self) -> bool:
        """Residual attention: the pre-softmax scores are carried from layer to layer."""
        return self.residual_attention != "none"

    @property
    def running_mean(self) -> bool:
        """RealFormer's attention logits are the carried sum divided by the layer's number."""
        return self.residual_attention == "mean"

    @property
    def is_original(self) -> bool:
        """The original BERT (post-LN, no residual attention): what other formats can express."""
        return not self.pre_ln and not self.is_realformer

    @property
    def name(self) -> str:
        """'post-LN', 'pre-LN', 'RealFormer', 'RealFormer-mean', 'pre-LN RealFormer', ..."""
        if not self.is_realformer:
            return f"{self.layer_norm_type}-LN"
        realformer = "RealFormer-mean" if self.running_mean else "RealFormer"
        return f"pre-LN {realformer}" if self.pre_ln else realformer

    def problem(self) -> str | None:
        """What is wrong with the keys ("unknown layer_norm_type 'x'; expected one of ..."), or None."""
        for key, allowed in (("layer_norm_type", LAYER_NORM_TYPES), ("residual_attention", RESIDUAL_ATTENTION_MODES)):
            if getattr(self, key) not in allowed:
                return f"unknown {key} {getattr(self, key)!r}; expected one of {', '.join(allowed)}"
        return None

    def config_keys(self) -> dict[str, str]:
        """The config keys that select this variant."""
        return {"layer_norm_type": self.layer_norm_type, "residual_attention": self.residual_attention}


# The variants by name, as `run_study.py --variants` takes them.
NAMED = types.MappingProxyType({variant.name: variant for variant in (
    Variant("post", "none"), Variant("pre", "none"), Variant("post", "sum"), Variant("post", "mean"))})
