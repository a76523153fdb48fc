"""`BertModel`: embeddings -> Transformer encoder -> pooler, as the original `modeling.BertModel`.

    import modeling
    from bert_realformer.checkpoints.config_files import read_config
    config = read_config("bert_config.json")
    model = modeling.BertModel(config)
    out = model({"input_ids": ids, "input_mask": mask, "token_type_ids": types}, training=False)

`out` holds what the original getters returned: `sequence_output` [B, S, H], `pooled_output`
[B, H], `all_encoder_layers` (list of L tensors [B, S, H]), `embedding_output` [B, S, E] (E:
`config.embedding_width`, H but for ALBERT's narrower embeddings), and,
with `output_attention_probs=True`, `attention_probs` (list of L float32 [B, N, S, S]).
The embedding table is `model.get_embedding_table()` ([V, E]). An input
`word_embedding_delta` [B, S, E] is added to the looked-up word vectors (adversarial training
perturbs them there; zeros change nothing).
"""

import types

import keras
from keras import ops

from modeling.config import BertConfig
from modeling.encoder import TransformerEncoder
from modeling.layers import (
    DeclaredInputs,
    LayerNorm,
    assert_rank,
    create_initializer,
    dense,
    dense_names,
    layer_norm_names,
    serializable,
)
from modeling.randomness import Dropout

WORD_EMBEDDING_DELTA = "word_embedding_delta"  # the input added to the word vectors [B, S, E]


def _block_scopes(query, key, value, attention_output, intermediate, output, post_norms, pre_norms):
    shared = {"query": query, "key": key, "value": value, "attention_output": attention_output,
              "intermediate": intermediate, "output": output}
    return types.MappingProxyType({
        layer_norm_type: types.MappingProxyType({**shared, "attention_layer_norm": norms[0],
                                                 "output_layer_norm": norms[1]})
        for layer_norm_type, norms in (("post", post_norms), ("pre", pre_norms))})


# The TF1 scopes of a block's weights inside its layer's scope, by naming and LayerNorm placement:
# the original BERT's, and google-research/albert's (where Pre-LN's norms are named after the
# sublayer they normalise the input of, as in BERT's Pre-LN names).
BLOCK_SCOPES = types.MappingProxyType({
    "bert": _block_scopes("attention/self/query", "attention/self/key", "attention/self/value",
                          "attention/output/dense", "intermediate/dense", "output/dense",
                          post_norms=("attention/output/LayerNorm", "output/LayerNorm"),
                          pre_norms=("attention/LayerNorm", "intermediate/LayerNorm")),
    "albert": _block_scopes("attention_1/self/query", "attention_1/self/key", "attention_1/self/value",
                            "attention_1/output/dense", "ffn_1/intermediate/dense",
                            "ffn_1/intermediate/output/dense",
                            post_norms=("LayerNorm", "LayerNorm_1"),
                            pre_norms=("attention_1/LayerNorm", "ffn_1/LayerNorm")),
})


def block_names(config: BertConfig, index: int) -> tuple[str, types.MappingProxyType]:
    """(the TF1 scope of the encoder's block `index`, its weights' scopes inside it: a
    `BLOCK_SCOPES` entry): `bert/encoder/layer_N`, or ALBERT's group's where the config has
    groups."""
    if config.num_hidden_groups is not None:
        return f"bert/encoder/transformer/group_{index}/inner_group_0", BLOCK_SCOPES["albert"][config.layer_norm_type]
    return f"bert/encoder/layer_{index}", BLOCK_SCOPES["bert"][config.layer_norm_type]


@serializable
class BertEmbeddings(keras.layers.Layer):
    """Word + token-type (none where `type_vocab_size` is 0; its one row at every position where it
    is 1, whatever the segment ids) + position embeddings, then LayerNorm and dropout. Position i reads
    row `position_offset + i` of the table (RoBERTa starts past its padding index; its own
    code gives padded positions the padding row, which only masked-out positions see).

    `call(input_ids [B, S], token_type_ids [B, S], word_delta=None [B, S, E])` -> [B, S, E]
    (E: `embedding_width`):
    `word_delta` is added to the word vectors. The sum is taken in float32 (no autocasting of the
    tables); the LayerNorm casts to the compute dtype.
    """

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.config = config = BertConfig.of(config)
        self.layer_norm = LayerNorm(config.layer_norm_eps, name="layer_norm")
        self.dropout = Dropout(config.hidden_dropout_prob)

    def build(self, input_ids_shape=None):
        c = self.config
        init = create_initializer(c.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(c.vocab_size, c.embedding_width), initializer=init)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(c.type_vocab_size, c.embedding_width),
            initializer=init) if c.type_vocab_size else None
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(c.max_position_embeddings, c.embedding_width),
            initializer=init)
        self.layer_norm.build((None, None, c.embedding_width))

    def call(self, input_ids, token_type_ids, training=None, word_delta=None):
        c = self.config
        seq_length = input_ids.shape[1]
        if seq_length is not None and seq_length > c.max_sequence_length:
            offset = f" less position_offset {c.position_offset}" if c.position_offset else ""
            raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                             f"{c.max_position_embeddings}{offset}")
        if seq_length is None:
            seq_length = ops.shape(input_ids)[1]
        x = ops.take(self.word_embeddings, input_ids, axis=0)
        if word_delta is not None:
            x = x + ops.cast(word_delta, x.dtype)
        if c.type_vocab_size == 1:  # (RoBERTa's: its tokenizer gives B's tokens type 0 too)
            x = x + ops.convert_to_tensor(self.token_type_embeddings)[None, :1]
        elif self.token_type_embeddings is not None:
            x = x + ops.take(self.token_type_embeddings, token_type_ids, axis=0)
        offset = c.position_offset
        x = x + ops.convert_to_tensor(self.position_embeddings)[None, offset:offset + seq_length]
        return self.dropout(self.layer_norm(x), training=training)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


@serializable
class BertModel(DeclaredInputs, keras.Model):
    """The BERT encoder (any variant of `BertConfig`). See the module docstring for I/O."""

    def __init__(self, config: BertConfig, name: str = "bert", **kwargs):
        super().__init__(name=name, **kwargs)
        config = BertConfig.of(config)
        config.check_buildable()
        self.config = config
        self.embeddings = BertEmbeddings(config, name="embeddings")
        self.encoder = TransformerEncoder(config, name="encoder")
        self.pooler = dense(config.hidden_size, config.initializer_range, name="pooler",
                            activation=config.pooler_activation)

    def build(self, input_shape=None):
        self.embeddings.build()
        self.encoder.build((None, None, self.config.embedding_width))
        self.pooler.build((None, self.config.hidden_size))
        self.built = True

    def tf1_names(self) -> list[tuple[str, keras.Variable]]:
        """[(TF1 name, variable)] in data-flow order: the original's names (`bert/...`), with
        Pre-LN's norms where its blocks have them (`attention/LayerNorm`,
        `intermediate/LayerNorm`, `bert/encoder/LayerNorm`); an ALBERT-shaped config's
        (`num_hidden_groups`) as google-research/albert names them, one scope per group."""
        emb = self.embeddings
        names = [("bert/embeddings/word_embeddings", emb.word_embeddings),
                 *([("bert/embeddings/token_type_embeddings", emb.token_type_embeddings)]
                   if emb.token_type_embeddings is not None else []),
                 ("bert/embeddings/position_embeddings", emb.position_embeddings),
                 *layer_norm_names("bert/embeddings/LayerNorm", emb.layer_norm)]
        encoder = self.encoder
        if encoder.embedding_projection is not None:
            names += dense_names("bert/encoder/embedding_hidden_mapping_in", encoder.embedding_projection)
        for i, block in enumerate(encoder.blocks):
            p, scopes = block_names(self.config, i)
            names += [*dense_names(f"{p}/{scopes['query']}", block.attention.query),
                      *dense_names(f"{p}/{scopes['key']}", block.attention.key),
                      *dense_names(f"{p}/{scopes['value']}", block.attention.value),
                      *dense_names(f"{p}/{scopes['attention_output']}", block.attention_output),
                      *layer_norm_names(f"{p}/{scopes['attention_layer_norm']}", block.attention_layer_norm),
                      *dense_names(f"{p}/{scopes['intermediate']}", block.intermediate),
                      *dense_names(f"{p}/{scopes['output']}", block.output_dense),
                      *layer_norm_names(f"{p}/{scopes['output_layer_norm']}", block.output_layer_norm)]
        if encoder.final_layer_norm is not None:
            names += layer_norm_names("bert/encoder/LayerNorm", encoder.final_layer_norm)
        return names + dense_names("bert/pooler/dense", self.pooler)

    def call(self, inputs, training: bool = False, output_attention_probs: bool = False,
             layer_keep_probs=None) -> dict:
        """`inputs`: a dict with `input_ids` [B, S] and optional `input_mask`, `token_type_ids`
        (default all ones / all zeros, as in the original; `segment_ids`, the TFRecord name, is
        accepted for `token_type_ids`) and `word_embedding_delta` [B, S, E] (added to the word
        vectors), or just the `input_ids` tensor.
        `layer_keep_probs`: Progressive Layer Dropping keep probabilities [L] (training only)."""
        if not isinstance(inputs, dict):
            inputs = {"input_ids": inputs}
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        token_type_ids = inputs.get("token_type_ids")
        if "segment_ids" in inputs:
            if token_type_ids is not None:
                raise ValueError("inputs name both token_type_ids and segment_ids (the same input); give one")
            token_type_ids = inputs["segment_ids"]
        for name, value in (("input_ids", input_ids), ("input_mask", input_mask), ("token_type_ids", token_type_ids)):
            if value is not None:
                assert_rank(value, 2, f"{name} [batch_size, seq_length]")
        if input_mask is None:
            input_mask = ops.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = ops.zeros_like(input_ids)

        embedding_output = self.embeddings(input_ids, token_type_ids, training=training,
                                           word_delta=inputs.get(WORD_EMBEDDING_DELTA))
        layers, probs = self.encoder(embedding_output, attention_mask=input_mask,
                                     training=training, return_probs=output_attention_probs,
                                     layer_keep_probs=layer_keep_probs)
        sequence_output = layers[-1]
        pooled_output = self.pooler(sequence_output[:, 0, :])
        outputs = {
            "sequence_output": sequence_output,
            "pooled_output": pooled_output,
            "all_encoder_layers": layers,
            "embedding_output": embedding_output,
        }
        if output_attention_probs:
            outputs["attention_probs"] = probs
        return outputs

    def get_embedding_table(self):
        """The word-embedding table [vocab_size, embedding_width] (a variable)."""
        return self.embeddings.word_embeddings

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(BertConfig.from_dict(config["config"]), name=config.get("name", "bert"))
