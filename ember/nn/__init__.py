"""ember.nn: jax.nn's functions under the same names (activations, softmax, one_hot, standardize,
dot_product_attention, the block-scaled scaled_matmul and scaled_dot_general), ember.nn.initializers, and layers as
Modules (pytrees of parameters: Linear, Conv, Embedding, LayerNorm, RMSNorm, BatchNorm, Dropout, MultiHeadAttention,
Sequential, MLP). See docs/nn.md."""
from ember.nn import initializers as initializers
from ember.nn._functions import (
    celu as celu, dot_product_attention as dot_product_attention, elu as elu, gelu as gelu, glu as glu,
    hard_sigmoid as hard_sigmoid, hard_silu as hard_silu, hard_swish as hard_swish, hard_tanh as hard_tanh,
    identity as identity, leaky_relu as leaky_relu, log1mexp as log1mexp, log_sigmoid as log_sigmoid,
    log_softmax as log_softmax, logmeanexp as logmeanexp, logsumexp as logsumexp,
    mish as mish, one_hot as one_hot, relu as relu, relu6 as relu6, selu as selu, sigmoid as sigmoid, silu as silu,
    soft_sign as soft_sign, softmax as softmax, softplus as softplus, sparse_plus as sparse_plus,
    sparse_sigmoid as sparse_sigmoid, squareplus as squareplus, standardize as standardize, swish as swish,
)
from ember.nn._layers import (
    MLP as MLP, BatchNorm as BatchNorm, Conv as Conv, Conv1d as Conv1d, Conv2d as Conv2d, Dropout as Dropout,
    Embedding as Embedding, Lambda as Lambda, LayerNorm as LayerNorm, Linear as Linear,
    MultiHeadAttention as MultiHeadAttention, RMSNorm as RMSNorm, Sequential as Sequential,
)
from ember.nn._module import Module as Module
from ember.nn._scaled import (
    get_scaled_dot_general_config as get_scaled_dot_general_config, scaled_dot_general as scaled_dot_general,
    scaled_matmul as scaled_matmul,
)
from ember.numpy import tanh as tanh

__all__ = [
    "BatchNorm", "Conv", "Conv1d", "Conv2d", "Dropout", "Embedding", "Lambda", "LayerNorm", "Linear", "MLP", "Module",
    "MultiHeadAttention", "RMSNorm", "Sequential",
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "identity", "initializers", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp",
    "mish", "one_hot", "relu", "relu6", "get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul",
    "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus", "sparse_sigmoid", "squareplus",
    "standardize", "swish", "tanh",
]
