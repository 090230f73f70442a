"""handlers.py — one lowering rule per PyTorch call (see lower.py for the
mapping table); projections, matmuls and attention are in matmul.py. Each h_<key>(L, args, kwargs) / m_<kind>(L, module, args,
kwargs) returns the value of the call: a Val (a view of a loom tensor), a
Const, or a tuple of them; ops it makes are appended to L.st.ops.
"""

import re

import torch
import torch.nn as nn

from .lower import PRIO, Unsupported
from .values import Const, ParamRef, Val

_LETTER_ROLE = {"b": "b", "s": "s", "h": "h", "f": "f", "v": "v", "t": "t"}
_NORM_NAME = re.compile(r"(RMS|Layer)Norm", re.I)


def is_norm_module(m):
    """A user-written LayerNorm/RMSNorm (e.g. LlamaRMSNorm): kept whole by the
    tracer and lowered to one norm op. Recognised by class name, with only
    1-D parameters (weight, maybe bias) and no submodules."""
    if not _NORM_NAME.search(type(m).__name__) or list(m.children()):
        return False
    ps = list(m.parameters(recurse=False))
    return 1 <= len(ps) <= 2 and all(p.dim() == 1 for p in ps)


# --- small helpers --------------------------------------------------------------

def _arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _dim(d, nd):
    return d + nd if d < 0 else d


def _is_scalar(x):
    return isinstance(x, (int, float, bool)) or (
        isinstance(x, Const) and (not isinstance(x.val, torch.Tensor) or x.val.dim() == 0))


def _as_val(L, x):
    return L.weight(x) if isinstance(x, ParamRef) else x


def fx_ordered(L, v, order, base):
    """v with its storage in the given order of view dims; a free transpose
    op is added when the storage is ordered otherwise (attention, norms and
    softmax name their dims by position)."""
    v = L.plain(v)
    want = []
    for i in order:
        want.extend(L.st.entry_leaves(v.t, v.entries[i]))
    if want == L.st.stored_leaves(v.t) and len(order) == len(v.entries):
        return v
    groups = [L.st.entry_atoms(v.t, v.entries[i]) for i in order]
    t, entries = L.st.new_from_atoms(groups, dtype=v.t.dtype)
    o = L.new_op("transpose", base)
    o.ins, o.outs = [v.t], [t]
    t.producer = o
    inv = [None] * len(order)
    for k, i in enumerate(order):
        inv[i] = entries[k]
    return Val(t, inv, v.shape)


def unary(L, kind, base, x, fn=None, saves=(), ws=()):
    """A pointwise-shaped op (elementwise, norm, softmax): output stored like x."""
    x = L.plain(x)
    y = L.st.clone_like(x)
    o = L.new_op(kind, base)
    o.ins, o.outs, o.fn = [x.t], [y.t], fn
    o.ws = [w.t for w in ws]
    o.saves = set(saves)
    y.t.producer = o
    return o, y


# --- views ------------------------------------------------------------------------

def h_alias(L, args, kwargs):
    return _as_val(L, args[0])


def _view(L, x, shape):
    x = _as_val(L, x)
    if isinstance(x, Const):
        return x
    return L.st.reshape(x, tuple(shape))


def h_reshape(L, args, kwargs):
    return _view(L, args[0], L.meta().shape)


h_reshape_as = h_flatten = h_unflatten = h_unsqueeze = h_squeeze = h_reshape


def h_permute(L, args, kwargs):
    x = _as_val(L, args[0])
    dims = args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else args[1]
    if "dims" in kwargs:
        dims = kwargs["dims"]
    return L.st.permute(x, [_dim(d, len(x.shape)) for d in dims])


def h_transpose(L, args, kwargs):
    x = _as_val(L, args[0])
    nd = len(x.shape)
    d0, d1 = _dim(_arg(args, kwargs, 1, "dim0"), nd), _dim(_arg(args, kwargs, 2, "dim1"), nd)
    perm = list(range(nd))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return L.st.permute(x, perm)


def h_t(L, args, kwargs):
    x = _as_val(L, args[0])
    return L.st.permute(x, list(reversed(range(len(x.shape)))))


def h_mT(L, args, kwargs):
    x = _as_val(L, args[0])
    perm = list(range(len(x.shape)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return L.st.permute(x, perm)


def h_expand(L, args, kwargs):
    """expand of size-1 dims is a broadcast: the view gains an axis that no
    storage holds (GQA's repeat_kv); it is only usable by attention."""
    x = _as_val(L, args[0])
    out = tuple(L.meta().shape)
    lead = len(out) - len(x.shape)
    entries = [[] for _ in range(lead)] + [list(e) for e in x.entries]
    src = (0,) * lead + x.shape
    rep = False
    for i, n in enumerate(out):
        if n != 1 and src[i] == 1:
            entries[i] = [("bcast", L.alg.new(n, "grp", PRIO["grp"]))]
            rep = True
    v = x.with_entries(entries, out)
    if rep and v.kind == "act":
        v.kind = "repeat"
    return v


h_expand_as = h_expand


def h_repeat_interleave(L, args, kwargs):
    x = _as_val(L, args[0])
    n = _arg(args, kwargs, 1, "repeats")
    d = _arg(args, kwargs, 2, "dim")
    if not isinstance(n, int) or d is None:
        raise Unsupported("repeat_interleave needs an int count and a dim")
    d = _dim(d, len(x.shape))
    entries = [list(e) for e in x.entries]
    entries[d] = entries[d] + [("bcast", L.alg.new(n, "grp", PRIO["grp"]))]
    v = x.with_entries(entries, L.meta().shape)
    v.kind = "repeat"
    return v


def h_repeat(L, args, kwargs):
    x = _as_val(L, args[0])
    reps = args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else args[1]
    reps = list(reps)
    lead = len(reps) - len(x.shape)
    entries = [[] for _ in range(lead)] + [list(e) for e in x.entries]
    for i, r in enumerate(reps):
        if r != 1:
            entries[i] = [("bcast", L.alg.new(r, "grp", PRIO["grp"]))] + entries[i]
    v = x.with_entries(entries, L.meta().shape)
    v.kind = "repeat"
    return v


def _chunks(L, x, n, d):
    """Splits view dim d of x into n equal chunks along its outermost factor:
    GPT-2's c_attn output [b, s, 3h] split into q, k, v makes the weight
    [h, qkv, heads, dh]."""
    x = _as_val(L, x)
    if x.kind not in ("act", "chunk") or x.t.weight:
        raise Unsupported("splitting this value is not supported")
    e = x.entries[d]
    L.alg.cut(L.st.entry_atoms(x.t, e), [n])
    leaves = L.st.entry_leaves(x.t, e)
    if not leaves or L.alg.find(L.st.atom_at(x.t, leaves[0])).size != n:
        raise Unsupported("split into %d parts does not follow an axis" % n)
    sel = leaves[0]
    L.alg.set_role(L.st.atom_at(x.t, sel), "qkv" if n == 3 else "part",
                   PRIO["qkv" if n == 3 else "part"])
    shape = list(x.shape)
    shape[d] //= n
    out = []
    for i in range(n):
        entries = [list(en) for en in x.entries]
        entries[d] = leaves[1:]
        src = x if x.kind == "act" else x.src
        out.append(Val(x.t, entries, shape, "chunk", src, (sel, i, n)))
    return tuple(out)


def h_split(L, args, kwargs):
    x = args[0]
    size = _arg(args, kwargs, 1, "split_size_or_sections", kwargs.get("split_size"))
    d = _dim(_arg(args, kwargs, 2, "dim", 0), len(x.shape))
    total = x.shape[d]
    if isinstance(size, (list, tuple)):
        if len(set(size)) != 1:
            raise Unsupported("split into unequal sizes %s" % list(size))
        size = size[0]
    if total % size:
        raise Unsupported("split of %d into pieces of %d" % (total, size))
    return _chunks(L, x, total // size, d)


def h_chunk(L, args, kwargs):
    x = args[0]
    n = _arg(args, kwargs, 1, "chunks")
    d = _dim(_arg(args, kwargs, 2, "dim", 0), len(x.shape))
    if x.shape[d] % n:
        raise Unsupported("chunk of %d into %d uneven parts" % (x.shape[d], n))
    return _chunks(L, x, n, d)


def h_getitem(L, args, kwargs):
    x, idx = args[0], args[1]
    if isinstance(x, (tuple, list)):
        return x[idx]
    if isinstance(x, Const):
        # a constant table indexed by an input (RoPE cos/sin by position_ids)
        # stays a constant: its values never change the op count
        return Const(L.meta())
    x = _as_val(L, x)
    idx = idx if isinstance(idx, tuple) else (idx,)
    full = all(i is None or i is Ellipsis or (isinstance(i, slice) and i == slice(None))
               for i in idx)
    if full:
        return L.st.reshape(x, tuple(L.meta().shape))
    if x.kind in ("act", "part", "rot") and not x.t.weight:
        return Val(x.t, [], L.meta().shape, "part", x if x.kind == "act" else x.src)
    raise Unsupported("indexing/slicing an activation (loom has no slice op)")


def _same_src(vals):
    srcs = {(v.src.t.id, str(v.src.entries)) for v in vals}
    return len(srcs) == 1


def h_cat(L, args, kwargs):
    xs = args[0]
    if all(isinstance(v, Val) and v.kind in ("part", "rot") for v in xs) and _same_src(xs):
        src = xs[0].src
        if L.meta().numel() == _numel(src.shape):
            return Val(src.t, [], L.meta().shape, "rot", src)
    raise Unsupported("concatenating activations (only rotate_half inside RoPE is supported)")


h_stack = h_cat


def _numel(shape):
    """Product of sizes (an iterable of ints)."""
    n = 1
    for s in shape:
        n *= s
    return n


# --- pointwise ----------------------------------------------------------------------

def _broadcast_groups(L, vals, shape):
    """Output atoms per view dim of a broadcasting op; unifies the operands'
    matching dims (right-aligned, as PyTorch broadcasts). A dim that only a
    constant brings gets a fresh atom."""
    nd = len(shape)
    groups = []
    for i, n in enumerate(shape):
        have = []
        for v in vals:
            j = i - (nd - len(v.shape))
            if j >= 0 and v.shape[j] == n and v.entries[j]:
                have.append((v, v.entries[j]))
        if n == 1:
            groups.append(L.st.entry_atoms(have[0][0].t, have[0][1]) if have else [])
        elif not have:
            groups.append([L.alg.new(n)])
        else:
            v0, e0 = have[0]
            for v, e in have[1:]:
                L.st.unify_entries(v0.t, e0, v.t, e)
            groups.append(L.st.entry_atoms(v0.t, e0))
    return groups


def pointwise(L, fn, base, xs, saves_inputs=False, tag=None):
    """An elementwise op over the activations xs (and weight views among them),
    with PyTorch broadcasting; the output is stored like the first operand
    whose shape is the output's."""
    shape = tuple(L.meta().shape)
    vals = [L.plain(_as_val(L, x)) for x in xs]
    groups = _broadcast_groups(L, vals, shape)
    like = next((v for v in vals if v.shape == shape and not v.t.weight), None)
    if like is not None:
        y = L.st.clone_like(like)
    else:
        t, entries = L.st.new_from_atoms(groups)
        y = Val(t, entries, shape)
    acts = [v for v in vals if not v.t.weight]
    o = L.new_op("elementwise", base)
    o.fn = fn
    o.ins = [v.t for v in acts]
    o.ws = [v.t for v in vals if v.t.weight]
    o.outs = [y.t]
    y.t.producer = o
    if saves_inputs:
        o.saves = {("in", i) for i in range(len(o.ins))}
    o.tag = tag
    return y


def _binary(L, key, args, kwargs):
    a, b = args[0], _arg(args, kwargs, 1, "other")
    live = [x for x in (a, b) if isinstance(x, (Val, ParamRef))]
    other = [x for x in (a, b) if not isinstance(x, (Val, ParamRef))]
    derived = [x for x in live if isinstance(x, Val) and x.kind in ("rot", "ropeterm")]
    if key == "mul" and derived and derived[0].kind == "rot" and other:
        return Val(derived[0].t, [], L.meta().shape, "ropeterm", derived[0].src)
    if key == "add" and derived:
        rope = _rope(L, a, b)
        if rope is not None:
            return rope
    if len(live) == 2:
        if key in ("add", "sub"):
            return pointwise(L, "add", "add", live)
        # a product of two activations keeps both for backward (autograd does)
        return pointwise(L, "mul", key, live, saves_inputs=True)
    x = live[0]
    if key in ("add", "sub"):
        scalar = _is_scalar(other[0]) if other else True
        return pointwise(L, "add", "add", [x], tag="scale" if scalar else "mask")
    if key == "div" and isinstance(x, Val) and x is b:
        raise Unsupported("dividing a constant by an activation")
    if other and _is_scalar(other[0]):
        return pointwise(L, "scale", "scale", [x], tag="scale")
    if isinstance(x, ParamRef) or (isinstance(x, Val) and x.t.weight):
        return pointwise(L, "scale", "scale", [x])
    y = pointwise(L, "mul", key, [x])
    # x * (a constant table): the first half of a RoPE pattern, maybe
    y.t.producer.tag = ("ropemul", x.t, tuple(map(tuple, x.entries)), L.node)
    return y


def _rope(L, a, b):
    """x * cos + rotate_half(x) * sin -> one rope op on x (HF Llama's
    apply_rotary_pos_emb; GPT-NeoX and Llama share it)."""
    term = a if isinstance(a, Val) and a.kind == "ropeterm" else b
    prod = b if term is a else a
    if not isinstance(prod, Val) or prod.kind != "act":
        return None
    mul = prod.t.producer
    if mul is None or not isinstance(mul.tag, tuple) or mul.tag[0] != "ropemul":
        return None
    _, xt, xentries, node = mul.tag
    src = term.src
    if xt is not src.t or len(node.users) != 1:
        return None
    mul.dead = True
    x = Val(xt, [list(e) for e in xentries], src.shape)
    o, y = unary(L, "elementwise", "rope", x, fn="rope")
    return L.st.reshape(y, tuple(L.meta().shape)) if y.shape != tuple(L.meta().shape) else y


def h_add(L, args, kwargs):
    return _binary(L, "add", args, kwargs)


def h_sub(L, args, kwargs):
    return _binary(L, "sub", args, kwargs)


def h_mul(L, args, kwargs):
    return _binary(L, "mul", args, kwargs)


def h_div(L, args, kwargs):
    return _binary(L, "div", args, kwargs)


def h_neg(L, args, kwargs):
    x = args[0]
    if isinstance(x, Val) and x.kind in ("part", "rot"):
        return x
    return pointwise(L, "scale", "neg", [x], tag="scale")


def h_masked_fill(L, args, kwargs):
    # a mask applied to scores: folded into the following softmax (patterns.py)
    return pointwise(L, "add", "mask", [args[0]], tag="mask")


def h_gelu(L, args, kwargs):
    return unary(L, "elementwise", "gelu", args[0], fn="gelu", saves={("in", 0)})[1]


def h_silu(L, args, kwargs):
    return unary(L, "elementwise", "silu", args[0], fn="silu", saves={("in", 0)})[1]


def _dropout(L, x, p, training, base):
    if not training or p == 0:
        return _as_val(L, x)
    o, y = unary(L, "elementwise", base, x, fn="dropout")
    o.saves_mask = True
    return y


def h_dropout(L, args, kwargs):
    p = _arg(args, kwargs, 1, "p", 0.5)
    training = _arg(args, kwargs, 2, "training", True)
    return _dropout(L, args[0], p, training, "dropout")


def h_softmax(L, args, kwargs):
    x = _as_val(L, args[0])
    d = _dim(_arg(args, kwargs, 1, "dim", -1), len(x.shape))
    if d != len(x.shape) - 1:
        raise Unsupported("softmax over dim %d (loom's softmax is over the last dim)" % d)
    x = fx_ordered(L, x, list(range(len(x.shape))), "softmax_in")
    return unary(L, "softmax", "softmax", x, saves={("out", 0)})[1]


# --- norms, embedding, loss ------------------------------------------------------------

def _norm(L, x, fn, w, bias, base):
    x = fx_ordered(L, _as_val(L, x), list(range(len(x.shape))), "norm_in")
    ws = []
    for p in (w, bias):
        if p is None:
            continue
        wv = _as_val(L, p)
        L.st.unify_entries(wv.t, wv.entries[-1], x.t, x.entries[-1])
        ws.append(wv)
    return unary(L, "norm", base, x, fn=fn, saves={("in", 0)}, ws=ws)[1]


def h_layer_norm(L, args, kwargs):
    return _norm(L, args[0], "layernorm", _arg(args, kwargs, 2, "weight"),
                 _arg(args, kwargs, 3, "bias"), "layer_norm")


def h_rms_norm(L, args, kwargs):
    return _norm(L, args[0], "rmsnorm", _arg(args, kwargs, 2, "weight"), None, "rms_norm")


def _embedding(L, ids, table_ref, base):
    rows = "v" if isinstance(ids, Val) else "pos"
    wv = L.weight(table_ref, roles={0: rows, 1: "h"})
    shape = tuple(L.meta().shape)
    if isinstance(ids, Val):
        ids = L.plain(ids)
        groups = [L.st.entry_atoms(ids.t, e) for e in ids.entries]
    else:
        groups = [[L.alg.new(n)] if n != 1 else [] for n in shape[:-1]]
    groups.append(L.st.entry_atoms(wv.t, wv.entries[1]))
    t, entries = L.st.new_from_atoms(groups)
    o = L.new_op("embedding", base)
    o.ins = [ids.t] if isinstance(ids, Val) else []
    o.ws = [wv.t]
    o.outs = [t]
    t.producer = o
    return Val(t, entries, shape)


def h_embedding(L, args, kwargs):
    w = _arg(args, kwargs, 1, "weight")
    if not isinstance(w, ParamRef):
        raise Unsupported("embedding table is not a parameter")
    return _embedding(L, args[0], w, "embedding")


def _cross_entropy(L, x, target, reduction, base):
    x = _as_val(L, x)
    if len(x.shape) != 2:
        raise Unsupported("cross_entropy over a %d-D input (expected [tokens, classes])"
                          % len(x.shape))
    x = fx_ordered(L, x, [0, 1], "logits")
    for a in L.st.entry_atoms(x.t, x.entries[1]):
        L.alg.set_role(a, "v", PRIO["v"])
    ins = [x.t]
    if isinstance(target, Val):
        target = L.plain(target)
        L.st.unify_entries(x.t, x.entries[0], target.t, target.entries[0])
        ins.append(target.t)
    if reduction == "none":
        t, entries = L.st.new_from_atoms([L.st.entry_atoms(x.t, x.entries[0])], dtype="fp32")
    else:
        t, entries = L.st.new_from_atoms([], dtype="fp32")
    o = L.new_op("cross_entropy", base)
    o.ins, o.outs = ins, [t]
    o.saves = {("in", 0)}      # softmax(logits) - onehot: backward needs the logits
    t.producer = o
    return Val(t, entries, tuple(L.meta().shape))


def h_cross_entropy(L, args, kwargs):
    return _cross_entropy(L, args[0], _arg(args, kwargs, 1, "target"),
                          kwargs.get("reduction", "mean"), "loss")


# --- modules -----------------------------------------------------------------------------

def m_linear(L, m, args, kwargs):
    from .matmul import _linear
    b = ParamRef(m.bias, None) if m.bias is not None else None
    return _linear(L, args[0], ParamRef(m.weight, None), b, None)


def m_embedding(L, m, args, kwargs):
    return _embedding(L, args[0], ParamRef(m.weight, None), None)


def m_norm(L, m, args, kwargs):
    fn = "rmsnorm" if "rms" in type(m).__name__.lower() else "layernorm"
    w = getattr(m, "weight", None)
    b = getattr(m, "bias", None)
    if isinstance(m, nn.LayerNorm) and len(m.normalized_shape) != 1:
        raise Unsupported("LayerNorm over %d dims (loom normalises one)" % len(m.normalized_shape))
    ps = {id(p) for p in m.parameters(recurse=False)}
    w = ParamRef(w, None) if isinstance(w, torch.Tensor) and id(w) in ps else None
    b = ParamRef(b, None) if isinstance(b, torch.Tensor) and id(b) in ps else None
    return _norm(L, args[0], fn, w, b, None)


def m_dropout(L, m, args, kwargs):
    return _dropout(L, args[0], m.p, m.training, None)


def m_gelu(L, m, args, kwargs):
    return unary(L, "elementwise", None, args[0], fn="gelu", saves={("in", 0)})[1]


def m_silu(L, m, args, kwargs):
    return unary(L, "elementwise", None, args[0], fn="silu", saves={("in", 0)})[1]


def m_softmax(L, m, args, kwargs):
    return h_softmax(L, [args[0], m.dim if m.dim is not None else -1], {})


def m_cross_entropy(L, m, args, kwargs):
    return _cross_entropy(L, args[0], args[1], m.reduction, None)


def m_identity(L, m, args, kwargs):
    return _as_val(L, args[0])


MODULES = [
    (nn.Linear, m_linear), (nn.Embedding, m_embedding), (nn.LayerNorm, m_norm),
    (getattr(nn, "RMSNorm", None), m_norm), (nn.Dropout, m_dropout), (nn.GELU, m_gelu),
    (nn.SiLU, m_silu), (nn.Softmax, m_softmax), (nn.CrossEntropyLoss, m_cross_entropy),
    (nn.Identity, m_identity),
]
