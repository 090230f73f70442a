"""matmul.py — lowering of projections, matmuls, einsums and attention
(see lower.py for the mapping table and hf_build.c for the conventions).

Eager attention is recognised from the axes themselves: in q @ kᵀ the
queries' sequence axis meets the keys' (the same atom), so the keys get the
key-sequence name t through a free view (k_view), and the probabilities @ v
contraction meets t again (v_view). GQA's repeat_kv arrives as a broadcast
axis on k and v; the queries are then grouped per kv head (q_view) and the
context regrouped back to heads (o_view), as graph/hf_build.c does, so no
copy of k or v appears. Fused attention (F.scaled_dot_product_attention)
reads q, k, v stored [b, s, heads, dh] and drops the broadcast axis.
"""

from .handlers import _LETTER_ROLE, _arg, _as_val, _numel, fx_ordered
from .lower import PRIO, Unsupported
from .values import ParamRef, Val, is_bcast


def restructure(L, v, rules, base):
    """A free view (reshape op) of v's tensor whose storage replaces runs of
    leaf atoms: rules is a list of (tuple of atom roots, list of new atoms).
    Used to rename the key sequence s -> t, and to group query heads per
    kv head for GQA (heads -> kvh, grp) and back."""
    st, alg = L.st, L.alg
    leaves = st.stored_leaves(v.t)
    roots = [alg.find(st.atom_at(v.t, p)) for p in leaves]
    slots, where = [], {}
    i = 0
    while i < len(leaves):
        for old, new in rules:
            n = len(old)
            if tuple(roots[i:i + n]) == tuple(alg.find(a) for a in old):
                first = len(slots)
                slots.extend(new)
                news = [(first + k,) for k in range(len(new))]
                for k in range(n):
                    where[leaves[i + k]] = news if k == 0 else []
                i += n
                break
        else:
            where[leaves[i]] = [(len(slots),)]
            slots.append(roots[i])
            i += 1
    t = st.tensor(slots, dtype=v.t.dtype)
    o = L.new_op("reshape", base)
    o.ins, o.outs = [v.t], [t]
    t.producer = o
    entries = []
    for e in v.entries:
        ne = []
        for p in e:
            if is_bcast(p):
                ne.append(p)
                continue
            for leaf in st.expand(v.t, p):
                ne.extend(where[leaf])
        entries.append(ne)
    return Val(t, entries, v.shape)


def einsum(L, base, operands, out_labels, out_shape, store=None, bias=None, saves=True):
    """An einsum op over operands [(Val, labels per view dim)]: dims with the
    same label are unified; the output has out_labels (view order), stored in
    `store` order (indices into out_labels, default view order)."""
    st = L.st
    first = {}
    for v, labels in operands:
        for e, lab in zip(v.entries, labels):
            if not e:
                continue
            if lab in first:
                ft, fe = first[lab]
                st.unify_entries(ft, fe, v.t, e)
            else:
                first[lab] = (v.t, e)
    groups = []
    for lab, n in zip(out_labels, out_shape):
        if lab not in first:
            groups.append([])
        else:
            ft, fe = first[lab]
            groups.append([a for a in st.entry_atoms(ft, fe)])
    store = list(store) if store is not None else list(range(len(out_labels)))
    t, sentries = st.new_from_atoms([groups[i] for i in store])
    entries = [None] * len(out_labels)
    for k, i in enumerate(store):
        entries[i] = sentries[k]
    o = L.new_op("einsum", base)
    ins = [(v, lab) for v, lab in operands if not v.t.weight]
    ws = [(v, lab) for v, lab in operands if v.t.weight]
    o.ins = [v.t for v, _ in ins]
    o.ws = [v.t for v, _ in ws]
    spec = []
    for v, labels in ins + ws:
        spec.append((v.t, [(lab, [p for p in e if not is_bcast(p)])
                           for e, lab in zip(v.entries, labels) if e]))
    spec.append((t, [(lab, e) for e, lab in zip(entries, out_labels) if e]))
    o.einsum = spec
    if bias is not None:
        o.ws.append(bias.t)
        o.bias = True
    o.outs = [t]
    t.producer = o
    if saves:
        o.saves = {("in", i) for i in range(len(o.ins))}
    return o, Val(t, entries, out_shape)


def h_linear(L, args, kwargs):
    x, w, b = args[0], _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias")
    return _linear(L, x, w, b, "linear")


def _linear(L, x, w, b, base):
    x = L.plain(_as_val(L, x))
    wv = L.weight(w, order=[1, 0]) if isinstance(w, ParamRef) else L.plain(w)
    nd = len(x.shape)
    xl = ["B%d" % i for i in range(nd - 1)] + ["K"]
    wl = ["N", "K"][-len(wv.shape):]
    for a in L.st.entry_atoms(wv.t, wv.entries[0]):
        # a projection's output is an MLP hidden dim unless shown otherwise
        L.alg.set_role(a, "f", PRIO["f"])
    bias = None
    if b is not None:
        bias = _as_val(L, b)
        L.st.unify_entries(bias.t, bias.entries[-1], wv.t, wv.entries[0])
    _, y = einsum(L, base, [(x, xl), (wv, wl)], xl[:-1] + ["N"], tuple(L.meta().shape),
                  bias=bias)
    return y


def _leaf_roots(L, v, e):
    return [L.alg.find(L.st.atom_at(v.t, p)) for p in L.st.entry_leaves(v.t, e)
            if not is_bcast(p)]


def _t_alias(L, s_root):
    key = ("t", s_root.id)
    if key not in L.tviews:
        L.tviews[key] = L.alg.alias(s_root, "t", PRIO["t"])
    return L.tviews[key]


def h_matmul(L, args, kwargs):
    a, b = _as_val(L, args[0]), _as_val(L, _arg(args, kwargs, 1, "other", None))
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise Unsupported("matmul with a 1-D operand")
    if a.kind not in ("act", "repeat", "chunk") or b.kind not in ("act", "repeat", "chunk"):
        L.plain(a if a.kind not in ("act", "repeat", "chunk") else b)
    if a.kind == "chunk":
        a = L.plain(a)
    if b.kind == "chunk":
        b = L.plain(b)
    na, nbd = len(a.shape), len(b.shape)
    nb = max(na, nbd) - 2
    al = ["B%d" % (nb - (na - 2) + i) for i in range(na - 2)] + ["M", "K"]
    bl = ["B%d" % (nb - (nbd - 2) + i) for i in range(nbd - 2)] + ["K", "N"]
    out = ["B%d" % i for i in range(nb)] + ["M", "N"]
    base, store = "matmul", None
    if not a.t.weight and not b.t.weight:
        am, bn = _leaf_roots(L, a, a.entries[-2]), _leaf_roots(L, b, b.entries[-1])
        ak, bk = _leaf_roots(L, a, a.entries[-1]), _leaf_roots(L, b, b.entries[-2])
        shared = [r for r in am if r in bn]
        aliased = [r for r in ak if r.alias_of is not None and L.alg.find(r.alias_of) in bk]
        if b.kind == "repeat":
            a = _gqa_group(L, a, b, al, bl)
        if shared:
            # q @ kᵀ: the keys' sequence becomes t through a free view
            base = "scores"
            b = restructure(L, b, [((r,), [_t_alias(L, r)]) for r in shared], "k_view")
            _attention_roles(L, a, al)
        elif aliased:
            # probs @ v: v's sequence is renamed t to meet the probabilities
            base = "context"
            rules = [((L.alg.find(r.alias_of),), [r]) for r in aliased]
            b = restructure(L, b, rules, "v_view")
            for x in _leaf_roots(L, b, b.entries[-1]):
                L.alg.set_role(x, "dh", PRIO["dh"])
            store = [0, nb] + list(range(1, nb)) + [nb + 1] if nb >= 1 else None
    elif b.kind == "repeat" or a.kind == "repeat":
        raise Unsupported("a repeated (expand) tensor multiplied by a weight")
    o, y = einsum(L, base, [(a, al), (b, bl)], out, tuple(L.meta().shape), store=store)
    o.tag = base
    if base == "context":
        y = _gqa_ungroup(L, y)
    return y


def _attention_roles(L, q, ql):
    for x in _leaf_roots(L, q, q.entries[-1]):
        L.alg.set_role(x, "dh", PRIO["dh"])
    for e, lab in zip(q.entries[1:-2], ql[1:-2]):
        roots = _leaf_roots(L, q, e)
        if len(roots) == 1:
            L.alg.set_role(roots[0], "heads", PRIO["heads"])


def _gqa_group(L, q, k, ql, kl):
    """k is repeat_kv(k): its head dim is [kvh, grp(broadcast)]. The queries
    are viewed as [.., kvh, grp, ..] so each kv head meets its group (the HF
    builder's q_view); the heads dim of q itself stays whole."""
    lab = {l: e for e, l in zip(k.entries, kl)}
    rules = []
    for e, l in zip(q.entries, ql):
        ke = lab.get(l)
        if not ke or not any(is_bcast(p) for p in ke):
            continue
        qroots = _leaf_roots(L, q, e)
        real = [L.st.atom_at(k.t, p) for p in ke if not is_bcast(p)]
        reps = [p[1] for p in ke if is_bcast(p)]
        if len(qroots) == 2 and len(reps) == 1 and len(real) == 1:
            # already grouped (the probabilities of a grouped q): v's copy
            # axis is the same group axis
            L.alg.unify(qroots[1], reps[0])
            continue
        if len(qroots) != 1 or len(real) != 1 or len(reps) != 1:
            raise Unsupported("grouped-query attention with an unusual head layout")
        kv = real[0]
        L.alg.set_role(kv, "kvh", PRIO["kvh"])
        L.alg.set_role(qroots[0], "heads", PRIO["heads"])
        kq = L.alg.new(L.alg.find(kv).size)
        L.alg.unify(kq, kv)
        rules.append(((qroots[0],), [kq, reps[0]]))
        L.groups[(L.alg.find(kv).id, L.alg.find(reps[0]).id)] = qroots[0]
    return restructure(L, q, rules, "q_view") if rules else q


def _gqa_ungroup(L, y):
    for (kid, rid), heads in L.groups.items():
        for e in y.entries:
            roots = _leaf_roots(L, y, e)
            if len(roots) == 2 and roots[0].id == L.alg.find(L.alg.atoms[kid]).id and \
                    roots[1].id == L.alg.find(L.alg.atoms[rid]).id:
                return restructure(L, y, [(tuple(roots), [heads])], "o_view")
    return y


def h_einsum(L, args, kwargs):
    eq = args[0].replace(" ", "")
    ops = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
    ins, out = eq.split("->") if "->" in eq else (eq, None)
    subs = ins.split(",")
    if out is None or "." in eq:
        raise Unsupported("einsum needs an explicit output and no ellipsis")
    operands = []
    for s, v in zip(subs, ops):
        v = _as_val(L, v)
        if isinstance(v, Val) and v.kind == "chunk":
            v = L.plain(v)
        if not isinstance(v, Val) or v.kind != "act":
            raise Unsupported("einsum operand is not a tensor")
        operands.append((v, list(s)))
        for e, c in zip(v.entries, s):
            # the user's letters hint at the axis: "bsh,hf->bsf"
            if c in _LETTER_ROLE:
                for a in L.st.entry_atoms(v.t, e):
                    L.alg.set_role(a, _LETTER_ROLE[c], PRIO["letter"])
    return einsum(L, "einsum", operands, list(out), tuple(L.meta().shape))[1]


def _strip(L, v):
    """Drops broadcast (repeat_kv) axes: fused attention reads k, v with their
    own kv heads."""
    if v.kind != "repeat":
        return L.plain(v)
    entries = [[p for p in e if not is_bcast(p)] for e in v.entries]
    return Val(v.t, entries, v.shape)


def h_sdpa(L, args, kwargs):
    q, k, v = (_as_val(L, x) for x in args[:3])
    # an explicit attn_mask (arg 3) is taken as non-causal: only is_causal says
    causal = bool(_arg(args, kwargs, 5, "is_causal", False))
    if len(q.shape) != 4:
        raise Unsupported("scaled_dot_product_attention on %d-D tensors (expected 4-D)"
                          % len(q.shape))
    q, k, v = L.plain(q), _strip(L, k), _strip(L, v)
    st, alg = L.st, L.alg
    st.unify_entries(q.t, q.entries[0], k.t, k.entries[0])
    st.unify_entries(q.t, q.entries[0], v.t, v.entries[0])
    st.unify_entries(q.t, q.entries[3], k.t, k.entries[3])
    st.unify_entries(k.t, k.entries[2], v.t, v.entries[2])
    st.unify_entries(k.t, k.entries[1], v.t, v.entries[1])
    for x, e, role in ((q, 1, "heads"), (k, 1, "kvh"), (q, 3, "dh"), (v, 3, "dh")):
        for a in st.entry_atoms(x.t, x.entries[e]):
            alg.set_role(a, role, PRIO[role])
    def heads(x):
        return _numel(L.alg.find(a).size for a in st.entry_atoms(x.t, x.entries[1]))
    if heads(q) == heads(k):    # multi-head: one kv head per query head
        st.unify_entries(q.t, q.entries[1], k.t, k.entries[1])
    q = fx_ordered(L, q, [0, 2, 1, 3], "q_layout")
    k = fx_ordered(L, k, [0, 2, 1, 3], "k_layout")
    v = fx_ordered(L, v, [0, 2, 1, 3], "v_layout")
    groups = [st.entry_atoms(q.t, q.entries[i]) for i in (0, 2, 1)] + \
        [st.entry_atoms(v.t, v.entries[3])]
    t, entries = st.new_from_atoms(groups)
    o = L.new_op("attention", "sdpa")
    o.ins, o.outs = [q.t, k.t, v.t], [t]
    o.causal = causal
    o.saves = {("in", 0), ("in", 1), ("in", 2), ("out", 0)}
    t.producer = o
    return Val(t, [entries[0], entries[2], entries[1], entries[3]], tuple(L.meta().shape))
