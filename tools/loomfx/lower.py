"""lower.py — from a traced torch.fx graph to pending loom ops.

Each fx node becomes one of: a loom op (Linear -> einsum, softmax, norm, ...),
a view (no op: reshape/permute/transpose only re-point dims, see values.py),
a constant (anything computed from shapes, buffers and literals alone: RoPE
tables, causal masks, position ids), or a reported problem. Problems do not
stop the walk: every unsupported call is collected with its source location
and module path, so one run lists all of them.

Mappings (PyTorch -> loom, with what the op keeps for backward, following
the house conventions of graph/hf_build.h and Korthikanti et al. 2022):

  nn.Linear, F.linear             einsum "...i,io->...o" (+ bias)    saves x
  matmul/@/bmm/mm, einsum         einsum                             saves activation inputs
  F.scaled_dot_product_attention  attention (causal = is_causal)     saves q, k, v, out
  softmax (last dim)              softmax                            saves out
  LayerNorm / RMSNorm modules     norm layernorm | rmsnorm           saves x
  GELU / SiLU                     elementwise gelu | silu            saves x
  silu(a) * b                     elementwise swiglu (fused)         saves a, b
  Dropout (p > 0, training)       elementwise dropout                saves a 1-byte mask
  x*cos + rotate_half(x)*sin      elementwise rope                   saves nothing
  + - (two activations)           elementwise add                    saves nothing
  * (two activations)             elementwise mul                    saves both
  * / by a constant               elementwise scale                  saves nothing
  Embedding, F.embedding          embedding                          saves nothing
  cross_entropy                   cross_entropy                      saves the logits
  split/chunk of a projection     reshape (free view, one output per chunk)

A scale or mask applied right before a softmax is folded into it
(Megatron's fused scale-mask-softmax), as the HF builder does.

Unfused attention (q @ kᵀ, softmax, @ v) keeps its three ops; the key
sequence gets its own dim name t through a free view (hf_build.c's
kv_view), and GQA's repeat_kv (expand + reshape of k, v) becomes a view of
q grouped per kv head (q_view / o_view) instead of a copy.
"""

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dims import Algebra, DimError
from .trace import ensure_sdpa
from .values import (POISON, Const, ParamRef, Poison, Store, Val, is_bcast)

# Role priorities: when two atoms meet, the better-evidenced role wins.
PRIO = {"user": 200, "b": 100, "s": 90, "h": 80, "v": 70, "pos": 70, "heads": 60, "dh": 60,
        "grp": 60, "t": 60, "kvh": 55, "qkv": 50, "part": 20, "letter": 15,
        "f": 10}


class Unsupported(Exception):
    def __init__(self, why):
        super().__init__(why)
        self.why = why


def _fn_table():
    ensure_sdpa()
    t = {
        F.linear: "linear", torch.matmul: "matmul", operator.matmul: "matmul",
        torch.bmm: "matmul", torch.mm: "matmul", torch.einsum: "einsum",
        F.softmax: "softmax", torch.softmax: "softmax", F.layer_norm: "layer_norm",
        F.gelu: "gelu", F.silu: "silu", F.dropout: "dropout", F.embedding: "embedding",
        F.cross_entropy: "cross_entropy", operator.add: "add", torch.add: "add",
        operator.iadd: "add", operator.sub: "sub", torch.sub: "sub", operator.mul: "mul",
        torch.mul: "mul", operator.imul: "mul", operator.truediv: "div", torch.div: "div",
        operator.neg: "neg", torch.neg: "neg", torch.reshape: "reshape",
        torch.permute: "permute", torch.transpose: "transpose", torch.flatten: "flatten",
        torch.unsqueeze: "unsqueeze", torch.squeeze: "squeeze", torch.cat: "cat",
        torch.stack: "stack", torch.split: "split", torch.chunk: "chunk",
        operator.getitem: "getitem", torch.repeat_interleave: "repeat_interleave",
        torch.masked_fill: "masked_fill", torch.t: "t",
    }
    for name, key in (("scaled_dot_product_attention", "sdpa"), ("rms_norm", "rms_norm")):
        if hasattr(F, name):
            t[getattr(F, name)] = key
    if hasattr(torch, "concat"):
        t[torch.concat] = "cat"
    return t


FN = _fn_table()
METHOD = {
    "view": "reshape", "reshape": "reshape", "view_as": "reshape_as", "reshape_as": "reshape_as",
    "permute": "permute", "transpose": "transpose", "t": "t", "flatten": "flatten",
    "unflatten": "unflatten", "unsqueeze": "unsqueeze", "squeeze": "squeeze",
    "expand": "expand", "expand_as": "expand_as", "split": "split", "chunk": "chunk",
    "softmax": "softmax", "matmul": "matmul", "bmm": "matmul", "mm": "matmul",
    "__getitem__": "getitem",
    "add": "add", "add_": "add", "sub": "sub", "mul": "mul", "mul_": "mul", "div": "div",
    "neg": "neg", "masked_fill": "masked_fill", "masked_fill_": "masked_fill",
    "repeat_interleave": "repeat_interleave", "repeat": "repeat",
    "contiguous": "alias", "float": "alias", "half": "alias", "bfloat16": "alias",
    "to": "alias", "type_as": "alias", "type": "alias", "clone": "alias", "detach": "alias",
}
ATTRS = {"T": "t", "mT": "mT", "real": "alias", "data": "alias"}


def call_name(node, root):
    """How a user would name the call: torch.fft.fft, Tensor.masked_scatter,
    nn.Conv1d, the operator symbol."""
    if node.op == "call_module":
        m = root.get_submodule(node.target)
        mod = type(m).__module__
        prefix = "nn." if mod.startswith("torch.nn") else mod + "."
        return prefix + type(m).__name__
    if node.op == "call_method":
        return "Tensor." + str(node.target)
    t = node.target
    if t is getattr and len(node.args) > 1:
        return "Tensor." + str(node.args[1])
    if getattr(t, "__module__", None) == "_operator":
        return "operator." + t.__name__
    name = getattr(t, "__name__", str(t))
    mod = getattr(t, "__module__", None) or ""
    if mod.startswith("torch._C._fft") or name.startswith("fft_"):
        return "torch.fft." + name.replace("fft_", "", 1)
    if mod.startswith("torch._C._linalg") or name.startswith("linalg_"):
        return "torch.linalg." + name.replace("linalg_", "", 1)
    if mod.startswith("torch.nn.functional") or mod.startswith("torch._C._nn"):
        return "torch.nn.functional." + name
    if mod.startswith("torch") or mod == "":
        return "torch." + name
    return "%s.%s" % (mod, name)


class Lowerer:
    def __init__(self, graph, root, input_roles, fuse_attention=False):
        self.graph = graph
        self.root = root
        self.alg = Algebra()
        self.st = Store(self.alg)
        self.vals = {}
        self.problems = []
        self.pnames = {}
        for name, p in root.named_parameters():
            self.pnames.setdefault(id(p), name)
        self.wt = {}                  # id(param) -> weight PTensor
        self.input_roles = input_roles
        self.fuse_attention = fuse_attention
        self.outputs = []
        self.groups = {}              # (kvh root id, grp root id) -> query heads atom
        self.tviews = {}              # (tensor id, atom id) -> renamed view Val
        self.splits = {}              # (tensor id, selector path) -> chunk tensors
        self.node = None

    # --- driver ---------------------------------------------------------------
    def run(self):
        for node in self.graph.nodes:
            self.node = node
            try:
                v = self.lower(node)
            except Unsupported as e:
                self.report(node, e.why)
                v = self.stand_in(node)
            except (DimError, ValueError) as e:
                self.report(node, "cannot follow the shapes: %s" % e)
                v = self.stand_in(node)
            except Exception as e:  # an exporter bug: still say where, and go on
                self.report(node, "internal error of the exporter (%s: %s); please report it"
                            % (type(e).__name__, e))
                v = self.stand_in(node)
            self.vals[node] = v
        from .patterns import run_patterns
        run_patterns(self)
        return self

    def stand_in(self, node):
        """After a reported problem, a fresh tensor of the call's shape lets
        the walk go on, so that later problems are reported too (nothing is
        written once anything was reported)."""
        t = self.meta(node)
        if not isinstance(t, torch.Tensor):
            return POISON
        atoms = [self.alg.new(n) for n in t.shape if n != 1]
        pt = self.st.tensor(atoms)
        entries, k = [], 0
        for n in t.shape:
            entries.append([] if n == 1 else [(k,)])
            k += n != 1
        return Val(pt, entries, t.shape)

    def report(self, node, why):
        self.problems.append({
            "call": call_name(node, self.root) if node.op.startswith("call") else node.op,
            "where": node.meta.get("loom_where", "?"),
            "module": self.module_of(node) or "(top level)",
            "why": why,
        })

    def module_of(self, node):
        if node.op == "call_module":
            return node.target
        return node.meta.get("loom_module", "")

    def val(self, a):
        if isinstance(a, torch.fx.Node):
            return self.vals[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.val(x) for x in a)
        if isinstance(a, dict):
            return {k: self.val(x) for k, x in a.items()}
        if isinstance(a, slice):
            return slice(self.val(a.start), self.val(a.stop), self.val(a.step))
        return a

    def meta(self, node=None):
        return (node or self.node).meta.get("val")

    def new_op(self, kind, base):
        n = self.node
        module = self.module_of(n)
        o = self.st.op(kind, None if n.op == "call_module" else base, module,
                       n.meta.get("loom_where", "?"))
        o.tag = None
        return o

    # --- values ---------------------------------------------------------------
    @staticmethod
    def flat(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                yield from Lowerer.flat(y)
        elif isinstance(x, dict):
            for y in x.values():
                yield from Lowerer.flat(y)
        else:
            yield x

    def live(self, args):
        return [x for x in self.flat(args) if isinstance(x, (Val, ParamRef))]

    def weight(self, ref, order=None, roles=None):
        """The weight PTensor of a parameter; created on first use with its
        dims stored in `order` (a permutation of the torch dims; loom keeps
        a Linear's weight as [in, out], the HF builder's convention)."""
        p = ref.param
        t = self.wt.get(id(p))
        if t is None:
            shape = tuple(p.shape)
            order = list(order) if order is not None else list(range(len(shape)))
            atoms = [self.alg.new(shape[i]) if shape[i] != 1 else None for i in range(len(shape))]
            slots = [atoms[i] for i in order if atoms[i] is not None]
            t = self.st.tensor(slots, weight=True, hint=self.pnames.get(id(p), ref.name))
            pos = {}
            k = 0
            for i in order:
                if atoms[i] is not None:
                    pos[i] = (k,)
                    k += 1
            t.torch_dims = [[pos[i]] if i in pos else [] for i in range(len(shape))]
            self.wt[id(p)] = t
        if roles:
            for i, r in roles.items():
                for path in t.torch_dims[i]:
                    self.alg.set_role(self.st.atom_at(t, path), r, PRIO[r])
        return Val(t, t.torch_dims, tuple(p.shape))

    def plain(self, v, what="operand"):
        """An activation usable as an op operand: chunks are materialised by a
        split op; other derived values cannot be."""
        if isinstance(v, ParamRef):
            return self.weight(v)
        if not isinstance(v, Val):
            raise Unsupported("expected a tensor %s" % what)
        if v.kind == "act":
            if any(is_bcast(p) for e in v.entries for p in e):
                raise Unsupported("a broadcast (expand/repeat) copy of an activation is used "
                                  "outside attention; loom has no copy op")
            return v
        if v.kind == "chunk":
            return self.materialize_chunk(v)
        raise Unsupported({
            "part": "a slice of an activation is used outside a recognised pattern (RoPE)",
            "rot": "a rotated/concatenated activation is used outside a RoPE pattern",
            "ropeterm": "half of a RoPE pattern (rotate_half(x) * sin) is used alone",
            "repeat": "a repeated (expand/repeat_kv) activation is used outside attention",
        }.get(v.kind, "a derived value is used where loom needs a tensor"))

    def materialize_chunk(self, v):
        """A chunk of a split becomes a tensor: one free view op (kind
        reshape, HF builder's "attn.split") turns the source into all its
        chunks, each stored as the source's leaf axes minus the selector."""
        src, (sel, index, n) = v.src, v.info
        st = self.st
        key = (src.t.id, sel)
        if key not in self.splits:
            leaves = [p for p in st.stored_leaves(src.t) if p != sel]
            slots = [self.alg.find(st.atom_at(src.t, p)) for p in leaves]
            o = self.new_op("reshape", "split")
            o.ins = [src.t]
            o.outs = [st.tensor(slots, dtype=src.t.dtype) for _ in range(n)]
            for t in o.outs:
                t.producer = o
            self.splits[key] = (o.outs, leaves)
        outs, leaves = self.splits[key]

        def remap(p):
            for k, lp in enumerate(leaves):
                if p[:len(lp)] == lp:
                    return [(k,) + p[len(lp):]]
            sub = st.expand(src.t, p)
            if sub == [p]:
                raise Unsupported("a chunk of a split is used across the split axis")
            return [q for x in sub for q in remap(x)]

        entries = [[q for p in e for q in (remap(p) if not is_bcast(p) else [p])]
                   for e in v.entries]
        return Val(outs[index], entries, v.shape)

    # --- dispatch ---------------------------------------------------------------
    def lower(self, node):
        if node.op == "placeholder":
            return self.placeholder(node)
        if node.op == "get_attr":
            obj = self.root
            for part in node.target.split("."):
                obj = getattr(obj, part)
            if isinstance(obj, nn.Parameter) or id(obj) in self.pnames:
                return ParamRef(obj, node.target)
            return Const(obj)
        if node.op == "output":
            for v in self.flat(self.val(node.args)):
                if isinstance(v, Val):
                    try:
                        self.outputs.append(self.plain(v, "output").t)
                    except Unsupported:
                        pass
            return None
        args, kwargs = self.val(node.args), self.val(node.kwargs)
        flat = list(self.flat((args, kwargs)))
        if any(isinstance(x, Poison) for x in flat):
            return POISON
        if "meta_error" in node.meta and self.live((args, kwargs)):
            raise Unsupported("the call fails on the example shapes: %s" % node.meta["meta_error"])
        if node.op == "call_module":
            return self.call_module(node, args, kwargs)
        if not self.live((args, kwargs)):
            return Const(self.meta(node))
        if node.op == "call_method":
            key = METHOD.get(node.target)
        elif node.target is getattr:
            # tensor attributes read as values: x.T, x.mT, x.real, ...
            key = ATTRS.get(args[1])
            args = (args[0],)
        else:
            key = FN.get(node.target)
        if key is None:
            raise Unsupported("no loom op for this call")
        from . import handlers, matmul
        fn = getattr(handlers, "h_" + key, None) or getattr(matmul, "h_" + key)
        return fn(self, args, kwargs)

    def placeholder(self, node):
        t = self.meta(node)
        if not isinstance(t, torch.Tensor):
            return Const(t)
        roles = self.input_roles.get(node.target)
        atoms = []
        for i, n in enumerate(t.shape):
            # size-1 input dims are kept: a batch of 1 is still the batch axis
            a = self.alg.new(n)
            if roles and i < len(roles) and roles[i]:
                r, prio = roles[i]
                self.alg.set_role(a, r, prio)
            atoms.append(a)
        dtype = {torch.int64: "int64", torch.int32: "int32", torch.bool: "u8",
                 torch.uint8: "u8"}.get(t.dtype)
        pt = self.st.tensor(atoms, dtype=dtype, hint=node.target)
        pt.is_input = True
        return Val(pt, [[(k,)] for k in range(len(atoms))], t.shape)

    def call_module(self, node, args, kwargs):
        m = self.root.get_submodule(node.target)
        from . import handlers
        for cls, fn in handlers.MODULES:
            if cls is not None and isinstance(m, cls):
                return fn(self, m, args, kwargs)
        if handlers.is_norm_module(m):
            return handlers.m_norm(self, m, args, kwargs)
        if not self.live((args, kwargs)) and not list(m.parameters()):
            return Const(self.meta(node))
        raise Unsupported("no loom op for this module")
