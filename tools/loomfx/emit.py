"""emit.py — pending ops to a loom-graph/1 document: layers, names, dims,
einsum subscripts, the model summary, and an atomic, deterministic write.

Layers (house convention, graph/graph.h): the transformer blocks are the
children of the model's repeated-block container — a ModuleList or
Sequential whose children all share one class (`layers.N`, `h.N`,
`blocks.N`, ...); when several qualify, the one holding the most ops wins
(--blocks PATH overrides). An op inside child N is in layer N+1; ops before
the first block op are layer 0 (embeddings), ops after the last are layer
L+1 (final norm, head, loss), and a top-level op between two blocks joins
the block before it. Ops are then listed layer by layer (a stable sort that
must keep every producer before its consumers).

Names: an op made by a module call is named by the module path
("model.layers.3.mlp.down_proj"); a function call inside a module's forward
by that path plus a role ("model.layers.3.self_attn.softmax"); duplicates get
_1, _2, ... Weights keep their parameter names, inputs their argument names,
other tensors are "<op>.out" (".out<i>" for several outputs).
"""

import json
import os
import tempfile

import torch.nn as nn

from .dims import Namer

_LETTER = {"b": "b", "s": "s", "t": "t", "h": "h", "heads": "n", "kvh": "k", "dh": "d",
           "f": "f", "v": "v", "qkv": "q", "grp": "g", "pos": "p"}
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
NAME_MAX = 95          # LOOM_NAME_MAX - 1
DIMS_MAX = 6           # LOOM_MAX_DIMS


class EmitError(Exception):
    pass


def block_containers(root):
    """(path, number of blocks) of every container of repeated blocks."""
    out = []
    for path, m in root.named_modules():
        if not isinstance(m, (nn.ModuleList, nn.Sequential)) or not path:
            continue
        kids = list(m.children())
        if kids and len({type(k) for k in kids}) == 1 and any(
                True for _ in kids[0].parameters()):
            out.append((path, len(kids)))
    return out


def _block_index(module, path):
    if module == path or not module.startswith(path + "."):
        return None
    head = module[len(path) + 1:].split(".")[0]
    return int(head) if head.isdigit() else None


def assign_layers(ops, root, blocks=None):
    """Sets op.layer; returns (container path or None, L)."""
    cands = block_containers(root)
    if blocks is not None:
        cands = [c for c in cands if c[0] == blocks]
        if not cands:
            raise EmitError("--blocks %s: no ModuleList/Sequential of repeated blocks there"
                            % blocks)
    best, best_key = None, None
    for path, n in cands:
        hits = sum(1 for o in ops if _block_index(o.module, path) is not None)
        key = (hits, n, -len(path))
        if hits and (best_key is None or key > best_key):
            best, best_key = (path, n), key
    if best is None:
        for o in ops:
            o.layer = 0
        return None, 0
    path, n = best
    idx = [_block_index(o.module, path) for o in ops]
    last_block = max(i for i, k in enumerate(idx) if k is not None)
    current = 0
    for i, o in enumerate(ops):
        if idx[i] is not None:
            current = idx[i] + 1
            o.layer = current
        elif i > last_block:
            o.layer = n + 1
        else:
            o.layer = current
    return path, n


def order_ops(ops):
    ops = sorted(ops, key=lambda o: (o.layer, o.id))
    pos = {o.id: i for i, o in enumerate(ops)}
    for o in ops:
        for t in o.ins:
            if t.producer is not None and pos.get(t.producer.id, -1) > pos[o.id]:
                raise EmitError("op at %s (layer %d) reads a tensor made in a later layer; "
                                "use --blocks to pick the block container" % (o.where, o.layer))
    return ops


def _unique(name, seen):
    if len(name) > NAME_MAX:
        raise EmitError("name longer than %d characters: %s" % (NAME_MAX, name))
    if name not in seen:
        seen.add(name)
        return name
    k = 1
    while "%s_%d" % (name, k) in seen:
        k += 1
    name = "%s_%d" % (name, k)
    seen.add(name)
    return name


def name_ops(ops):
    seen = set()
    for o in ops:
        base = o.base
        if base == "rope" and o.ins and o.ins[0].producer is not None \
                and o.ins[0].producer.name is not None:
            src = o.ins[0].producer.name.split(".")[-1]
            base = (src[:-5] if src.endswith("_proj") else src) + "_rope"
        if base is None:
            name = o.module
        else:
            name = "%s.%s" % (o.module, base) if o.module else base
        o.name = _unique(name, seen)


def name_tensors(ops, tensors):
    seen = set()
    for t in tensors:
        if t.weight or t.is_input:
            t.name = _unique(t.hint, seen)
    for o in ops:
        for i, t in enumerate(o.outs):
            if t.name is None:
                sfx = ".out" if len(o.outs) == 1 else ".out%d" % i
                t.name = _unique(o.name + sfx, seen)


def _subscripts(st, namer, spec):
    letters, used = {}, set()
    parts = []
    for t, pairs in spec:
        at = {}
        for lab, paths in pairs:
            leaves = [leaf for p in paths for leaf in st.expand(t, p)]
            for k, leaf in enumerate(leaves):
                key = (lab, k)
                if key not in letters:
                    nm = namer.name(st.atom_at(t, leaf))
                    c = _LETTER.get(nm, nm[0])
                    if c in used or not c.isalpha():
                        c = next(x for x in _ALPHABET if x not in used)
                    letters[key] = c
                    used.add(c)
                at[leaf] = letters[key]
        sub = ""
        for leaf in st.stored_leaves(t):
            if leaf not in at:
                raise EmitError("internal: an einsum operand axis has no label")
            sub += at[leaf]
        parts.append(sub)
    return ",".join(parts[:-1]) + "->" + parts[-1]


def build(L, name, dtype, blocks=None):
    """The loom-graph/1 document (a dict) for the lowered program."""
    st, alg = L.st, L.alg
    ops = [o for o in st.ops if not o.dead]
    if not ops:
        raise EmitError("the traced model has no ops loom can plan")
    container, n_blocks = assign_layers(ops, L.root, blocks)
    ops = order_ops(ops)
    name_ops(ops)
    used = []
    seen = set()
    for o in ops:
        for t in o.ins + o.ws + o.outs:
            if t.id not in seen:
                seen.add(t.id)
                used.append(t)
    # declare tensors in first-use order, so the file reads top to bottom
    name_tensors(ops, used)
    namer = Namer(alg)
    tensors = []
    for t in used:
        leaves = st.stored_leaves(t)
        if len(leaves) > DIMS_MAX:
            raise EmitError("tensor %s has %d axes (loom allows %d)" % (t.name, len(leaves),
                                                                       DIMS_MAX))
        atoms = [st.atom_at(t, p) for p in leaves]
        d = {"name": t.name, "dims": [namer.name(a) for a in atoms],
             "shape": [alg.find(a).size for a in atoms]}
        if t.dtype is not None and t.dtype != dtype:
            d["dtype"] = t.dtype
        if t.weight:
            d["weight"] = True
        tensors.append(d)
    jops = []
    for o in ops:
        d = {"name": o.name, "kind": o.kind, "layer": o.layer,
             "inputs": [t.name for t in o.ins]}
        if o.ws:
            d["weights"] = [t.name for t in o.ws]
        d["outputs"] = [t.name for t in o.outs]
        if o.kind == "einsum":
            d["einsum"] = _subscripts(st, namer, o.einsum)
            if o.bias:
                d["bias"] = True
        if o.fn:
            d["fn"] = o.fn
        if o.kind == "attention" and o.causal:
            d["causal"] = True
        saves = [o.ins[i].name if w == "in" else o.outs[i].name for w, i in sorted(o.saves)]
        if saves:
            d["saves"] = saves
        if o.saves_mask:
            d["saves_mask"] = True
        jops.append(d)
    doc = {"format": "loom-graph/1", "name": name, "dtype": dtype,
           "model": model_info(L, ops, namer, n_blocks, dtype)}
    doc["tensors"] = tensors
    doc["ops"] = jops
    return doc


def model_info(L, ops, namer, n_blocks, dtype):
    """loom_model_info fields that the graph itself shows (sizes of the dims
    named h, heads, kvh, dh, f, v, s, b)."""
    sizes = {}
    for role, by_size in namer.by_role.items():
        for size, nm in by_size.items():
            if nm == role:
                sizes[role] = size
    info = {"arch": "fx", "layers": n_blocks}
    for key, role in (("hidden", "h"), ("heads", "heads"), ("kv_heads", "kvh"),
                      ("head_dim", "dh"), ("ffn", "f"), ("vocab", "v"),
                      ("max_positions", "pos"), ("seq", "s"), ("batch", "b")):
        if role in sizes:
            info[key] = sizes[role]
    if "heads" in info and "kv_heads" not in info:
        info["kv_heads"] = info["heads"]
    tables = {o.ws[0].id for o in ops if o.kind == "embedding" and o.ws}
    info["tied_embeddings"] = any(o.kind == "einsum" and any(w.id in tables for w in o.ws)
                                  for o in ops)
    info["gated_mlp"] = any(o.fn == "swiglu" for o in ops)
    info["flash_attention"] = any(o.kind == "attention" for o in ops)
    return info


def dumps(doc):
    """Stable text: one tensor / op per line, keys in schema order."""
    def one(x):
        return json.dumps(x, separators=(", ", ": "), ensure_ascii=True)
    lines = ["{"]
    for k in ("format", "name", "dtype", "model"):
        lines.append('  "%s": %s,' % (k, one(doc[k])))
    for k in ("tensors", "ops"):
        items = doc[k]
        lines.append('  "%s": [' % k)
        for i, it in enumerate(items):
            lines.append("    " + one(it) + ("," if i + 1 < len(items) else ""))
        lines.append("  ]" + ("," if k == "tensors" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    """Writes text to path through a temporary file in the same directory and
    a rename, so that a failed run never leaves a partial file."""
    if path == "-":
        import sys
        sys.stdout.write(text)
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".fx_export.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
