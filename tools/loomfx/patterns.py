"""patterns.py — rewrites over the pending ops once the whole program is
lowered, where knowing every consumer of a tensor matters:

* softmax prologue: a scale (by a constant) or a mask (masked_fill / adding a
  constant mask) whose only consumer is a softmax is folded into it, as
  Megatron's fused scale-mask-softmax kernel does and as the HF builder
  counts (graph/hf_build.c, attention_unfused). A folded mask marks the
  softmax as masked (causal when attention is later fused).
* SwiGLU: silu(a) * b, where silu(a) feeds only the product, becomes one
  swiglu op keeping a and b (hf_build.c loom_hf_swiglu_mlp): same FLOPs
  (4 + 1 per element), and what backward truly keeps.
* attention fusion (--fuse-attention only): the unfused chain
  scores -> softmax -> [dropout] -> context, with its k/v/q views, becomes
  one attention op on (q, k, v), i.e. the model planned as if it used a
  flash kernel. Its causal flag is set when a mask was folded into the
  softmax.
"""


def _consumers(ops):
    users = {}
    for o in ops:
        if o.dead:
            continue
        for t in o.ins:
            users.setdefault(t.id, []).append(o)
    return users


def _sole(users, t, op, outputs):
    return users.get(t.id, []) == [op] and t not in outputs


def fold_softmax(L, users):
    for op in L.st.ops:
        if op.dead or op.kind != "softmax":
            continue
        while True:
            x = op.ins[0]
            p = x.producer
            if p is None or p.dead or p.kind != "elementwise" or p.tag not in ("scale", "mask") \
                    or len(p.ins) != 1 or p.ws or not _sole(users, x, op, L.outputs):
                break
            op.ins[0] = p.ins[0]
            users[p.ins[0].id] = [op if u is p else u for u in users.get(p.ins[0].id, [])]
            p.dead = True
            if p.tag == "mask":
                op.tag = "masked"


def fuse_swiglu(L, users):
    for op in L.st.ops:
        if op.dead or op.kind != "elementwise" or op.fn != "mul" or len(op.ins) != 2 or op.ws:
            continue
        for i in (0, 1):
            x = op.ins[i]
            p = x.producer
            if p is not None and not p.dead and p.fn == "silu" and _sole(users, x, op, L.outputs):
                op.fn = "swiglu"
                op.ins = [p.ins[0], op.ins[1 - i]]
                op.saves = {("in", 0), ("in", 1)}
                op.module, op.base, op.where = p.module, p.base, p.where
                p.dead = True
                break


def _producer(t, kind, base=None):
    p = t.producer
    if p is None or p.dead or p.kind != kind or (base is not None and p.base != base):
        return None
    return p


def fuse_attention(L, users):
    for op in L.st.ops:
        if op.dead or op.kind != "einsum" or op.tag != "context":
            continue
        chain = [op]
        probs = op.ins[0]
        drop = _producer(probs, "elementwise")
        if drop is not None and drop.fn == "dropout" and _sole(users, probs, op, L.outputs):
            chain.append(drop)
            probs = drop.ins[0]
        sm = _producer(probs, "softmax")
        if sm is None or not _sole(users, probs, chain[-1], L.outputs):
            L.problems.append(_cannot(op, "the probabilities do not come from a softmax"))
            continue
        scores = _producer(sm.ins[0], "einsum")
        if scores is None or scores.tag != "scores" or not _sole(users, sm.ins[0], sm, L.outputs):
            L.problems.append(_cannot(op, "the softmax input is not q @ kᵀ"))
            continue
        chain += [sm, scores]
        q, k, v = scores.ins[0], scores.ins[1], op.ins[1]
        views = []
        for name in ("q", "k", "v"):
            t = {"q": q, "k": k, "v": v}[name]
            p = _producer(t, "reshape", name + "_view")
            if p is not None and _sole(users, t, scores if name != "v" else op, L.outputs):
                views.append(p)
                t = p.ins[0]
            if name == "q":
                q = t
            elif name == "k":
                k = t
            else:
                v = t
        out = op.outs[0]
        o_view = users.get(out.id, [])
        if len(o_view) == 1 and o_view[0].kind == "reshape" and o_view[0].base == "o_view":
            views.append(o_view[0])
            out = o_view[0].outs[0]
        dims = [len(L.st.stored_leaves(t)) for t in (q, k, v, out)]
        if dims != [4, 4, 4, 4]:
            L.problems.append(_cannot(op, "q, k, v are not [b, s, heads, dh] tensors"))
            continue
        for p in chain[1:] + views:
            p.dead = True
        op.kind, op.base, op.tag, op.einsum = "attention", "sdpa", "attention", None
        op.ins, op.outs = [q, k, v], [out]
        op.causal = sm.tag == "masked"
        op.saves = {("in", 0), ("in", 1), ("in", 2), ("out", 0)}
        out.producer = op
        users = _consumers(L.st.ops)


def _cannot(op, why):
    return {"call": "attention fusion", "where": op.where, "module": op.module or "(top level)",
            "why": "cannot fuse the attention here: " + why}


def run_patterns(L):
    users = _consumers(L.st.ops)
    fold_softmax(L, users)
    users = _consumers(L.st.ops)
    fuse_swiglu(L, users)
    if L.fuse_attention:
        fuse_attention(L, _consumers(L.st.ops))
