"""values.py — what a traced value is while lowering to loom: tensors, views
of them, constants, parameters, and the pending loom ops.

* PTensor: a loom tensor being built. Its storage is a list of slots (atoms,
  see dims.py); its dims are known only at the end, once every refinement
  has happened, when each slot expands into leaf atoms and each leaf gets a
  name.
* Val: a PyTorch tensor value that is a *view* of a PTensor: one entry per
  PyTorch dim, each entry the list of paths (positions in the PTensor) whose
  product that dim is. Reshape, permute, transpose, unsqueeze and friends
  only make new entries, never new loom tensors: in loom they are free, and
  an einsum reads its operands in any order. Size-1 dims have empty
  entries.
  A Val may also be *derived* (kind != "act"): a chunk of a split (GPT-2's
  fused c_attn), a broadcast repeat (GQA's repeat_kv), a slice or rotation
  of a tensor (rotate_half inside RoPE). Derived values become loom tensors
  only where a pattern uses them (split op, attention, rope); elsewhere they
  are reported as unsupported.
* Const: a value that does not depend on the model's inputs or parameters
  (shapes, position ids, RoPE cos/sin tables, causal masks). It is folded
  away: it never becomes a loom tensor.
* ParamRef: a parameter read (get_attr). It becomes a weight PTensor when an
  op consumes it, in the storage order that op prefers.
* POp: a pending loom op over PTensors.

Broadcast axes (from expand/repeat) appear in entries as ("bcast", atom)
paths: they exist in the view but not in the storage.
"""


class PTensor:
    __slots__ = ("id", "slots", "weight", "dtype", "name", "producer", "hint", "torch_dims",
                 "is_input")

    def __init__(self, tid, slots, weight=False, dtype=None, hint=None):
        self.id = tid
        self.slots = list(slots)
        self.weight = weight
        self.dtype = dtype          # None = the graph's default dtype
        self.name = None            # given by emit
        self.producer = None        # POp
        self.hint = hint            # preferred name (parameter or input name)
        self.torch_dims = None      # parameters: paths of the torch dims, torch order
        self.is_input = False


class Val:
    __slots__ = ("t", "entries", "shape", "kind", "src", "info")

    def __init__(self, t, entries, shape, kind="act", src=None, info=None):
        self.t = t
        self.entries = [list(e) for e in entries]
        self.shape = tuple(int(n) for n in shape)
        self.kind = kind            # act | chunk | repeat | part | rot | ropeterm
        self.src = src              # derived values: the Val they derive from
        self.info = info            # kind-specific (chunk: (sel_path, index, n))

    def with_entries(self, entries, shape):
        return Val(self.t, entries, shape, self.kind, self.src, self.info)


class Const:
    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val


class ParamRef:
    __slots__ = ("param", "name")

    def __init__(self, param, name):
        self.param = param
        self.name = name


class Poison:
    """The result of an unsupported call (already reported): anything computed
    from it is dropped silently so that one problem is reported once."""
    __slots__ = ()


POISON = Poison()


class POp:
    __slots__ = ("id", "kind", "base", "module", "where", "ins", "ws", "outs", "fn", "causal",
                 "bias", "saves", "saves_mask", "einsum", "name", "layer", "dead", "tag")

    def __init__(self, oid, kind, base, module, where):
        self.id = oid
        self.kind = kind
        self.base = base            # short role name: "c_attn", "scores", "softmax", ...
        self.module = module        # module path of the call ("" = top level)
        self.where = where          # "file:line (function)"
        self.ins, self.ws, self.outs = [], [], []
        self.fn = None
        self.causal = None
        self.bias = False
        self.saves = set()          # ("in", i) / ("out", i)
        self.saves_mask = False
        self.einsum = None          # [(PTensor, [(label, [paths])])] for ins, ws, then output
        self.name = None
        self.layer = None
        self.dead = False
        self.tag = None             # pattern bookkeeping


# Derived kinds that only patterns consume: their views track shape only.
NO_ENTRIES = ("part", "rot", "ropeterm")


def is_bcast(path):
    return isinstance(path, tuple) and len(path) == 2 and path[0] == "bcast"


class Store:
    """Atom algebra plus the PTensors and POps made so far; the path helpers
    that tie views to storage live here."""

    def __init__(self, alg):
        self.alg = alg
        self.tensors = []
        self.ops = []

    # --- tensors and paths ------------------------------------------------------
    def tensor(self, slots, weight=False, dtype=None, hint=None):
        t = PTensor(len(self.tensors), slots, weight, dtype, hint)
        self.tensors.append(t)
        return t

    def atom_at(self, t, path):
        if is_bcast(path):
            return path[1]
        a = t.slots[path[0]]
        for j in path[1:]:
            a = self.alg.find(a).children[j]
        return a

    def expand(self, t, path):
        """Leaf paths under path (following refinements made since)."""
        if is_bcast(path):
            return [("bcast", leaf) for leaf in self.alg.leaves(path[1])]
        r = self.alg.find(self.atom_at(t, path))
        if not r.children:
            return [path]
        out = []
        for j in range(len(r.children)):
            out.extend(self.expand(t, path + (j,)))
        return out

    def entry_atoms(self, t, entry):
        return [self.atom_at(t, p) for p in entry]

    def entry_leaves(self, t, entry):
        out = []
        for p in entry:
            out.extend(self.expand(t, p))
        return out

    def stored_leaves(self, t):
        out = []
        for i in range(len(t.slots)):
            out.extend(self.expand(t, (i,)))
        return out

    def new_from_atoms(self, groups, dtype=None, hint=None):
        """A PTensor whose slots are the atoms of `groups` (one list per view
        dim, in view order); returns (tensor, entries)."""
        slots, entries = [], []
        for g in groups:
            e = []
            for a in g:
                e.append((len(slots),))
                slots.append(a)
            entries.append(e)
        return self.tensor(slots, dtype=dtype, hint=hint), entries

    def clone_like(self, v, dtype=None):
        """A new PTensor with v's storage structure (same slot atoms, same
        order), and v's entries re-pointed at it: the output of a pointwise
        op, a norm or a softmax."""
        t = self.tensor(list(v.t.slots), dtype=dtype if dtype is not None else v.t.dtype)
        return Val(t, v.entries, v.shape)

    def op(self, kind, base, module, where):
        o = POp(len(self.ops), kind, base, module, where)
        self.ops.append(o)
        return o

    # --- view algebra -----------------------------------------------------------
    def reshape(self, v, shape):
        """v viewed with a new shape: atoms are cut at the new boundaries and
        regrouped (row-major, outermost first). Size-1 atoms (a batch of 1)
        ride along with the next dim, or fill a size-1 dim of the new shape."""
        if v.kind in NO_ENTRIES:
            return v.with_entries([], shape)
        flat = [p for e in v.entries for p in e]
        atoms = self.entry_atoms(v.t, flat)
        sizes = [n for n in shape if n != 1]
        self.alg.cut(atoms, self.alg.cumprods(sizes))
        leaves = []
        for p in flat:
            leaves.extend(self.expand(v.t, p))
        size = [self.alg.find(self.atom_at(v.t, p)).size for p in leaves]
        entries, k = [], 0
        for n in shape:
            e, prod = [], 1
            if n == 1:
                if k < len(leaves) and size[k] == 1:
                    e.append(leaves[k])
                    k += 1
            while prod < n:
                e.append(leaves[k])
                prod *= size[k]
                k += 1
            if prod != n:
                raise ValueError("reshape does not line up with the axes")
            entries.append(e)
        return v.with_entries(entries, shape)

    def permute(self, v, perm):
        if v.kind in NO_ENTRIES:
            return v.with_entries([], [v.shape[i] for i in perm])
        return v.with_entries([v.entries[i] for i in perm], [v.shape[i] for i in perm])

    def unify_entries(self, ta, ea, tb, eb):
        xs, ys = self.entry_atoms(ta, ea), self.entry_atoms(tb, eb)
        if xs and ys:
            self.alg.unify_lists(xs, ys)
        elif any(self.alg.find(a).size != 1 for a in xs + ys):
            raise ValueError("a dim of size 1 meets one that is not")
