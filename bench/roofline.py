"""The roofline of bench/run.py's rows: for each row that does real work, the bytes it must move at least and the
flops it must do (MODELS, keyed by the row's name); the rows left out and why (NOT_MODELLED); and, given this
machine's peaks (bench/peaks.py) and the measured times, each row's bound and the fraction of it that ember and JAX
reach (`python3 bench/run.py --roofline`; docs/performance.md, "The roofline").

The model of a row is a lower bound on its work, computed from its shapes:
- bytes: each input read once and each output written once (float32 and int32: 4 bytes), intermediates kept in
  registers or cache. An input the program does not need is not counted (the cotangent of the attention forward
  row; the logits of take_along_axis's gradient, which does not depend on them).
- flops: a multiply-add is 2, any other arithmetic operation or comparison 1, a transcendental (exp, tanh, log,
  sin) 1 although it costs 10-20 in practice. Where matrix products (or convolutions) dominate, only they and the
  optimizer's update are counted: the elementwise work around them is under 2% of the products. Backpropagation
  through a product costs two more products of its size (the weight gradient, and the input gradient where one is
  needed). Attention is counted dense (the causal mask is applied to the full product, as both libraries do).
  Linear algebra uses the textbook counts (LU 2n^3/3, Cholesky n^3/3, Householder QR 2mn^2 - 2n^3/3, eigh's
  tridiagonalization 4n^3/3, svd's bidiagonalization 8n^3/3, inv 2n^3), an FFT 5 N log2 N (complex) or 2.5 N log2 N
  (real); the random rows count 32-bit integer lane operations of threefry as flops (THREEFRY_OPS).

The bound of a row is the larger of bytes / copy bandwidth and flops / FMA throughput, both on all cores (XLA's
programs run on the plugin's pool of one thread per core). The bandwidth is that of the copy whose working set
(bytes read + written, a power of two from 2 MiB to 512 MiB: peaks.WORKING_SETS) is nearest the row's bytes on a
log scale (the 2 MiB copy below 2 MiB, where numpy's per-call cost shows): the rows' arrays of a few MiB stay in
this machine's caches, which copy two to six times as fast as memory. One ladder for all rows, so that rows of the
same size share a roof. A copy writes half of what
it moves, so a row that mostly reads (a reduction) can pass its roof a little: read such a fraction as "at the
roof". A row whose time at the peaks is under OVERHEAD_SECONDS is marked "overhead": its fraction is still
printed, but no library could approach it. Bench-only: ember never imports this."""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import peaks as peaks_module

MiB = 1 << 20
# A row whose time at the peaks is under this is reported as overhead-bound: a jitted call alone takes 4-8 us here,
# a loop iteration or a kernel's start a few more, so the fixed costs, not the roofs, set its time.
OVERHEAD_SECONDS = 10e-6


class Work(NamedTuple):
    """A row's least work: bytes moved (inputs read + outputs written) and flops done."""
    bytes: float
    flops: float


def f32(*shapes: tuple[int, ...] | int) -> int:
    """Bytes of float32 (or int32) arrays of the given shapes; an int is a count of elements."""
    return 4 * sum(s if isinstance(s, int) else math.prod(s) for s in shapes)


def product(*dims: int) -> int:
    """flops of a matrix product [..., m, k] @ [..., k, n] given as (batch..., m, k, n): 2 per multiply-add."""
    return 2 * math.prod(dims)


Layers = Sequence[tuple[int, int]]


def params_of(layers: Layers) -> int:
    """Elements of dense layers' weights and biases."""
    return sum(i * o + o for i, o in layers)


def backprop(layers: Layers, batch: int, first_input_grad: bool = False) -> int:
    """flops of a forward and backward pass through dense layers [(in, out)] at a batch: the forward products, as
    many for the weight gradients, and the input gradients (the first layer's only if asked)."""
    forward = sum(product(batch, i, o) for i, o in layers)
    return 2 * forward + sum(product(batch, i, o) for i, o in layers[0 if first_input_grad else 1:])


def transformer_forward(tokens: int, seq: int, d: int, layers: int = 1, vocab: int = 0) -> int:
    """flops of the products of pre-norm transformer blocks (q, k, v and the output projection, a 4x MLP, dense
    attention: scores and weighted sum, each 2 * tokens * seq * d), with tied logits over a vocabulary."""
    block = product(tokens, d, 3 * d) + product(tokens, d, d) + 2 * product(tokens, d, 4 * d) + 2 * product(
        tokens, seq, d)
    return layers * block + product(tokens, d, vocab)


ADAM_FLOPS = 16  # per parameter: the two moments (7), their corrections (2), the update with decay (7)
# 32-bit lane operations per random word: threefry2x32 makes two words with 20 rounds of add, rotate, xor and 5 key
# injections of three adds (~75 for the pair); a normal from a word: the float in [-1, 1) (4) and erf_inv (a log,
# one polynomial of 9 multiply-adds, a sqrt, ~21).
THREEFRY_OPS = 38
NORMAL_OPS = 25


SQUARE_1000 = (1000, 1000)


def sort_comparisons(rows: int, n: int) -> float:
    """The comparisons of sorting `rows` rows of n: n log2 n each."""
    return rows * n * math.log2(n)


def reduction(shape: tuple[int, ...], out: int, per_element: int) -> Work:
    """A reduction of a float32 array to `out` elements, `per_element` flops per input element."""
    return Work(f32(shape, out), per_element * math.prod(shape))


def elementwise(shape: tuple[int, ...], per_element: int, inputs: int = 1, outputs: int = 1) -> Work:
    return Work(f32(*[shape] * (inputs + outputs)), per_element * math.prod(shape))


def mlp_step(layers: Layers, batch: int, features: tuple[int, int], update: bool = True) -> Work:
    """jit(grad) (update=False: the gradients out) or an SGD step (the new parameters out) of dense layers on a
    batch of (features in, targets out) examples."""
    p = params_of(layers)
    return Work(f32(2 * p, (batch, features[0]), (batch, features[1]), 1),
                backprop(layers, batch) + (2 * p if update else 0))


MLP = [(64, 256), (256, 256), (256, 10)]  # bench/run.py's mlp_problem
MLP_FEATURES = (64, 10)


def per_example_grads(layers: Layers, batch: int) -> Work:
    """vmap(grad) over a batch: per example, the forward products, the weight gradients as outer products (one
    multiply per weight, each written out) and the input gradients past the first layer."""
    p = params_of(layers)
    per = sum(2 * i * o + i * o for i, o in layers) + sum(2 * i * o for i, o in layers[1:])
    return Work(f32(p, batch * p, (batch, MLP_FEATURES[0]), (batch, MLP_FEATURES[1])), batch * per)


def hessian_vector(layers: Layers, batch: int) -> Work:
    """jvp of grad (forward over reverse), the products only: the forward pass and its tangent (2 products per
    layer, 1 for the first, whose input has no tangent), the backward input gradients and their tangents (3 per
    layer past the first), the weight gradients' tangents (2 per layer)."""
    fwd = [product(batch, i, o) for i, o in layers]
    flops = 5 * sum(fwd) - 2 * fwd[0] + 3 * sum(fwd[1:])
    p = params_of(layers)
    return Work(f32(3 * p, (batch, MLP_FEATURES[0]), (batch, MLP_FEATURES[1])), flops)


def conv(batch: int, hw: int, k: int, cin: int, cout: int) -> int:
    """flops of a SAME convolution of [batch, hw, hw, cin] with a k x k x cin x cout kernel."""
    return product(batch, hw, hw, k, k, cin, cout)


def cnn_step() -> Work:
    """bench/run.py's cnn_train_step: two convolutions (the first one's input gradient not needed), a dense layer."""
    c1, c2, dense = conv(64, 28, 3, 1, 16), conv(64, 14, 3, 16, 32), product(64, 7 * 7 * 32, 10)
    p = 3 * 3 * 16 + 16 + 3 * 3 * 16 * 32 + 32 + 7 * 7 * 32 * 10 + 10
    return Work(f32((64, 28, 28, 1), 64, 2 * p, 1), 2 * (c1 + c2 + dense) + c2 + dense)


def transformer_step() -> Work:
    """bench/run.py's transformer_step: one block, b16 t64 d128, SGD; every input gradient is needed (g1 is a
    parameter), so the backward pass is twice the forward."""
    d = 128
    p = d * 3 * d + d * d + 2 * d * 4 * d + 2 * d + 4 * d
    return Work(f32(2 * p, 2 * 16 * 64 * d, 1), 3 * transformer_forward(16 * 64, 64, d) + 2 * p)


def char_lm_step() -> Work:
    """bench/run.py's char_lm_step: 2 blocks, d 128, 32 x 128 bytes, tied byte embeddings, AdamW (parameters and
    both moments read and written)."""
    d, seq, vocab, layers = 128, 128, 256, 2
    block = 2 * 2 * d + 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    p = vocab * d + seq * d + layers * block + 2 * d
    return Work(f32(6 * p, (32, seq + 1), 1), 3 * transformer_forward(32 * seq, seq, d, layers, vocab) + ADAM_FLOPS * p)


def digits_step() -> Work:
    layers = [(64, 128), (128, 128), (128, 10)]
    p = params_of(layers)
    return Work(f32(6 * p, (64, 64), 64, 1), backprop(layers, 64) + ADAM_FLOPS * p)


def mnist_fromscratch_step() -> Work:
    """Parameters fed back as float32 arrays; the batch given as numpy float64 each call (8 bytes an element)."""
    layers = [(784, 1024), (1024, 1024), (1024, 10)]
    p = params_of(layers)
    return Work(f32(2 * p, 1) + 8 * 128 * (784 + 10), backprop(layers, 128) + 2 * p)


def dropout_step() -> Work:
    layers = [(784, 512), (512, 10)]
    p = params_of(layers)
    mask = (THREEFRY_OPS + 3) * 128 * 512
    return Work(f32(2 * p, (128, 784), (128, 10), 1), backprop(layers, 128) + mask + 2 * p)


def attention(backward: bool) -> Work:
    """Causal attention b8 h8 t128 d64: the forward pass (q, k, v in, the output out: the cotangent argument is not
    read), or the gradient in q, k, v (5 products: the scores again, then dP, dV, dQ, dK)."""
    qkv, scores = (8, 8, 128, 64), 8 * 8 * 128 * 128
    one = product(64, 128, 64, 128)
    if not backward:
        return Work(f32(*[qkv] * 4), 2 * one + 7 * scores)  # scale, mask, softmax's max, sub, exp, sum, divide
    return Work(f32(*[qkv] * 7), 5 * one + 14 * scores)


def layer_norm_grad(shape: tuple[int, ...]) -> Work:
    """The gradient of sum(layer_norm(x) * x): the forward (5 per element) and its backward (8 per element)."""
    return elementwise(shape, 13)


def rnn_grad() -> Work:
    """value_and_grad of bench/run.py's RNN: 1000 steps of x @ Wx (32 -> 64) + h @ Wh (64 -> 64); backward, the
    weight gradients and the gradient through h."""
    steps, i, h = 1000, 32, 64
    p = i * h + h * h + h
    return Work(f32(2 * p, (steps, i), h, 1), steps * (2 * product(i, h) + 3 * product(h, h)))


def while_grad() -> Work:
    """grad of 1000 steps of v = tanh(v @ W) * 0.5 + v * 0.5 in W (256 x 256): per step the matrix-vector
    product, the gradient through v and the weight gradient's outer product."""
    return Work(f32(2 * 256 * 256, 256), 1000 * 3 * product(256, 256))


def microbatch_grads() -> Work:
    """8 microbatches of 32 rows through 3 tanh layers 64 x 64; the gradients accumulated."""
    layers = [(64, 64)] * 3
    return Work(f32(2 * 3 * 64 * 64, (256, 64), 8), 8 * backprop(layers, 32))


def embedding_grad() -> Work:
    """The 64 x 128 looked-up rows of 128 read (repeats counted), ids and targets read, the dense table gradient
    (32768 x 128) written; the means and the scatter-add."""
    rows = 64 * 128
    return Work(f32((rows, 128), rows, (64, 128), (32768, 128), 1), 2 * rows * 128 + 4 * 64 * 128)


def lu(n: int) -> float:
    return 2 * n ** 3 / 3


def triangular_solves(n: int, k: int) -> int:
    return 2 * n * n * k  # two triangular solves of k right-hand sides


SQUARE = (1024, 1024)

MODELS: dict[str, Work] = {
    "device_put(numpy f32[256,256])": Work(f32((256, 256), (256, 256)), 0),
    "grad (no jit) of a fresh closure, MLP": mlp_step(MLP, 128, MLP_FEATURES, update=False),
    "jit: sum of f32[1e7]": reduction((10 ** 7,), 1, 1),
    "jit: softmax f32[1024,1024]": elementwise(SQUARE, 5),
    "jit: sum(a * a, axis=1), f32[1024,1024]": reduction(SQUARE, 1024, 2),
    "jit: einsum ij,ij->i, f32[1024,1024]": reduction(SQUARE, 1024, 2),
    "jit: var(a, axis=1), f32[1024,1024]": reduction(SQUARE, 1024, 4),
    "jit: sum(exp(a), axis=0), f32[1024,1024]": reduction(SQUARE, 1024, 2),
    "jit: layer norm f32[4096,1024]": elementwise((4096, 1024), 5),
    "jit: softmax f32[1024,1000]": elementwise((1024, 1000), 5),
    "jit: log_softmax f32[1024,1000]": elementwise((1024, 1000), 5),
    "jit(grad): layer norm f32[4096,1024]": layer_norm_grad((4096, 1024)),
    "jit: attention forward b8 h8 t128 d64": attention(backward=False),
    "jit(grad): attention backward b8 h8 t128 d64": attention(backward=True),
    "train step: transformer block b16 t64 d128, SGD": transformer_step(),
    "jit: MLP train step, batch 128": mlp_step(MLP, 128, MLP_FEATURES),
    "jit: MLP train step, batch 1024": mlp_step(MLP, 1024, MLP_FEATURES),
    "jit: 512x512 f32 matmul": Work(f32(*[(512, 512)] * 3), product(512, 512, 512)),
    "jit(grad): 3-layer MLP loss, batch 128": mlp_step(MLP, 128, MLP_FEATURES, update=False),
    "jit(vmap(grad)): MLP per-example grads, 128": per_example_grads(MLP, 128),
    "jit(jvp(grad)): MLP Hessian-vector product": hessian_vector(MLP, 128),
    # tanh(W @ x + b) and its Jacobian diag(1 - tanh^2) W: W, x, b in, the 64 x 64 Jacobian out
    "jit(jacfwd): tanh(W @ x + b), W 64x64": Work(f32((64, 64), 64, 64, (64, 64)), product(64, 64) + 4 * 64 + 64 * 64),
    "jit(jacrev): tanh(W @ x + b), W 64x64": Work(f32((64, 64), 64, 64, (64, 64)), product(64, 64) + 4 * 64 + 64 * 64),
    "eager vmap: x @ w, xs f32[128,64], w 64x64": Work(f32((128, 64), (64, 64), (128, 64)), product(128, 64, 64)),
    "jit(value_and_grad): RNN lax.scan 1000, h 64": rnn_grad(),
    "jit: lax.fori_loop 1000, f32[256] update": Work(f32(256, 256), 1000 * 256 * 4),
    "jit(value_and_grad): embedding 32768x128, 64x128 ids": embedding_grad(),
    # the gradient of -mean(take_along_axis(z, labels)) is -1/1024 at the labels, 0 elsewhere: labels in, z's
    # shape out
    "jit(grad): take_along_axis f32[1024,1000] labels": Work(f32(1024, (1024, 1000)), 1024),
    "jit(value_and_grad): CNN 2 conv + pool, batch 64": cnn_step(),
    "random: 1e7 float32 normals": Work(f32(10 ** 7), (THREEFRY_OPS + NORMAL_OPS) * 10 ** 7),
    "jit: dropout mask + apply, f32[128,512]": elementwise((128, 512), THREEFRY_OPS + 3),
    "jit: MLP train step with a dropout mask, b128": dropout_step(),
    "train step: digits MLP + AdamW, batch 64": digits_step(),
    "train step: JAX's MNIST from scratch (numpy float64 params), b128": mnist_fromscratch_step(),
    "train step: char-LM transformer + AdamW, 32x128": char_lm_step(),
    "jit: einsum attention b8 h8 128x128 d64": Work(f32(*[(8, 8, 128, 64)] * 4),
                                                    2 * product(64, 128, 64, 128) + 8 * 8 * 128 * 128),
    "jit(grad) through a 1000-step while_loop vs JAX's static fori_loop (scan)": while_grad(),
    "Ref: 8 microbatch gradients accumulated into a Ref in a scan, jit": microbatch_grads(),
    # the small pair first: b @ c (8 x 256 x 64), then a @ that (256 x 8 x 64)
    "jit: einsum ij,jk,kl->il (opt_einsum order)": Work(f32((256, 8), (8, 256), (256, 64), (256, 64)),
                                                        product(8, 256, 64) + product(256, 8, 64)),
    "jit: prod f32[1024,1024] axis=1": reduction(SQUARE, 1024, 1),
    "jit: nansum f32[1024,1024]": reduction(SQUARE, 1, 2),
    "jit: nanmean f32[1024,1024] axis=0": reduction(SQUARE, 1024, 3),
    "jit: var f32[1024,1024] axis=1, correction=1": reduction(SQUARE, 1024, 4),
    "jit: median f32[1024,1024] axis=1": reduction(SQUARE, 1024, 4),  # a selection: ~4 comparisons an element
    "jit: count_nonzero f32[1024,1024] axis=0": reduction(SQUARE, 1024, 2),
    "jit: ptp f32[1024,1024] axis=1": reduction(SQUARE, 1024, 2),
    "jit: max f32[1024,1024] axis=1": reduction(SQUARE, 1024, 1),
    "jit: max f32[1024,1024] axis=0": reduction(SQUARE, 1024, 1),
    "jit: max f32[1024,1024]": reduction(SQUARE, 1, 1),
    "fft: fft c64[2**20]": Work(2 * 8 * 2 ** 20, 5 * 2 ** 20 * 20),
    "fft: rfft2 f32[1024,1024]": Work(f32(SQUARE) + 8 * 1024 * 513, 2.5 * 2 ** 20 * 20),
    "linalg: cholesky + solve f32 512x512": Work(f32((512, 512), (512, 4), (512, 4)),
                                                 lu(512) + triangular_solves(512, 4) + 512 ** 3 / 3),
    "linalg: svd f32 256x256": Work(f32((256, 256), 256), 8 * 256 ** 3 / 3),
    "linalg: eigh f32 256x256": Work(f32((256, 256), 256), 4 * 256 ** 3 / 3),
    "linalg: qr f32 512x256": Work(f32((512, 256), (256, 256)), 2 * 512 * 256 ** 2 - 2 * 256 ** 3 / 3),
    # a float32 transcendental: one read, one write and (as everywhere here) one flop per element
    "transcendental: sin f32[4194304]": Work(f32(2 ** 22, 2 ** 22), 2 ** 22),
    "transcendental: tan f32[4194304]": Work(f32(2 ** 22, 2 ** 22), 2 ** 22),
    "transcendental: log1p f32[4194304]": Work(f32(2 ** 22, 2 ** 22), 2 ** 22),
    "transcendental: erf_inv f32[4194304]": Work(f32(2 ** 22, 2 ** 22), 2 ** 22),
    "transcendental: tanh f32[4194304]": Work(f32(2 ** 22, 2 ** 22), 2 ** 22),
    # a sort reads its input and writes its output; its flops: the comparisons a comparison sort needs at least,
    # n log2 n per row of n (a radix sort or a quicksort's vector compares do other work: read the fraction loosely)
    "sort: sort f32[1e6]": Work(f32(10 ** 6, 10 ** 6), sort_comparisons(1, 10 ** 6)),
    "sort: argsort f32[1e6]": Work(f32(10 ** 6, 10 ** 6), sort_comparisons(1, 10 ** 6)),
    "sort: sort f32[1000,1000] axis=-1 (rows)": Work(f32(SQUARE_1000, SQUARE_1000), sort_comparisons(1000, 1000)),
    "sort: median f32[1024,1024] axis=0": reduction(SQUARE, 1024, 4),  # (as the other median row: a selection)
    "sort: lax.top_k f32[1000,1000] k=10": Work(f32(SQUARE_1000, 2 * 1000 * 10), 1000 * 1000 * 2),
    "sort: lax.approx_max_k f32[1000,1000] k=10": Work(f32(SQUARE_1000, 2 * 1000 * 10), 1000 * 1000 * 2),
    # a ragged dot's least work is one dot's: every row meets its group's matrix once (rows, weights, result)
    "jit: lax.ragged_dot f32[4096,256] x 8 groups of f32[256,256]": Work(f32((4096, 256), (8, 256, 256),
                                                                             (4096, 256)), product(4096, 256, 256)),
    # writing the bits (and XLA's Philox: ~10 integer ops per 32-bit word, read loosely)
    "random: lax.rng_bit_generator 10^6 uint32": Work(f32(10 ** 6), 10 * 10 ** 6),
    "random: 1e7 float32 normals, rbg key (RngBitGenerator)": Work(f32(10 ** 7), (10 + NORMAL_OPS) * 10 ** 7),
    "linalg: inv f32 512x512": Work(f32((512, 512), (512, 512)), 2 * 512 ** 3),
    "linalg: batched solve f32 64x(32x32)": Work(f32((64, 32, 32), (64, 32, 4), (64, 32, 4)),
                                                 64 * (lu(32) + triangular_solves(32, 4))),
}

OVERHEAD = "overhead-bound: a call on a few elements, the dispatch is the time"
NOT_MODELLED: dict[str, str] = {
    "jit: tiny f32[4] add (dispatch overhead)": OVERHEAD,
    "jit: numpy inputs": OVERHEAD,
    "jit: a list of 10 arrays": OVERHEAD,
    "jit: a dict of params": OVERHEAD,
    "jit: a keyword argument": OVERHEAD,
    "jit: a static argument": OVERHEAD,
    "np.asarray(jit result) f32[4]": OVERHEAD,
    "eager: f32[4] add (op-by-op dispatch)": OVERHEAD,
    "eager: f32[4] * 2.0": OVERHEAD,
    "eager: exp(f32[4])": OVERHEAD,
    "eager: f32[4].sum()": OVERHEAD,
    "eager: f32[3,4] + f32[4] (broadcast)": OVERHEAD,
    "eager: f32[3,4].mean(axis=0)": OVERHEAD,
    "eager: where(f32[4] > 1, f32[4], 0.0)": OVERHEAD,
    "eager: 200 distinct x[i], f32[65536,16]": "overhead-bound: 200 eager reads of 64 bytes each",
    "Ref: jitted row update of a Ref f32[1024,256] (call + in-place write)":
        "overhead-bound: a call writing one row of 1 KiB",
    "compile: jit(value_and_grad) RNN scan 1000": "compile time: no hardware roof",
    "compile: jit lax.fori_loop 1000": "compile time: no hardware roof",
    "compile: jit MLP 784-512-512-10 value_and_grad + SGD": "compile time: no hardware roof",
    "new function, same program: RNN scan 1000": "compile time: no hardware roof",
}


class Bound(NamedTuple):
    """A row's roof: which of its times at the peaks is larger, that time, and the bandwidth used."""
    kind: str  # "memory", "compute", or "overhead" (under OVERHEAD_SECONDS at the peaks)
    seconds: float
    bandwidth: float


def working_set(work: Work, sizes: Sequence[int] = peaks_module.WORKING_SETS) -> int:
    """The measured working set (bytes read + written) whose copy is the row's roof: the nearest on a log scale."""
    return min(sizes, key=lambda size: abs(math.log2(size) - math.log2(max(work.bytes, 1))))


def bound(work: Work, bandwidth: float, flops_per_second: float | None) -> Bound:
    """The larger of the row's memory time and compute time at the peaks (memory only if there is no FMA peak)."""
    memory = work.bytes / bandwidth
    compute = work.flops / flops_per_second if flops_per_second else 0.0
    seconds = max(memory, compute)
    kind = "overhead" if seconds < OVERHEAD_SECONDS else "memory" if memory >= compute else "compute"
    return Bound(kind, seconds, bandwidth)


def report(measured: Sequence[tuple[str, float, float]], p: peaks_module.Peaks) -> str:
    """The roofline table of rows measured as (name, ember seconds, JAX seconds), at the peaks p: the peaks, then
    for each row its least bytes and flops, bound, time at the peaks and ember's and JAX's fraction of it (the time
    at the peaks over the measured time); the rows without a model are listed with the reason."""
    lines = [peaks_module.describe(p), "",
             f"{'roofline':45s} {'MB':>8s} {'GFLOP':>8s} {'bound':>9s} {'GB/s':>6s} {'at peak':>10s} "
             f"{'ember':>6s} {'jax':>6s}"]
    skipped = []
    for name, t_ours, t_theirs in measured:
        work = MODELS.get(name)
        if work is None:
            skipped.append(f"{name:45s} {NOT_MODELLED.get(name, 'no model')}")
            continue
        b = bound(work, p.copy_by_working_set[working_set(work)], p.fma_all_cores)
        lines.append(f"{name:45s} {work.bytes / 1e6:8.2f} {work.flops / 1e9:8.3f} {b.kind:>9s} "
                     f"{b.bandwidth / 1e9:6.1f} {b.seconds * 1e6:8.1f}us {b.seconds / t_ours:6.2f} "
                     f"{b.seconds / t_theirs:6.2f}")
    return "\n".join(lines + ([""] + skipped if skipped else []))
