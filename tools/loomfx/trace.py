"""trace.py — build a PyTorch model without weights and trace it with torch.fx.

Two things make "any PyTorch model in" work without allocating a single
weight:

* Construction on the meta device.  Torch >= 2.0 has `with torch.device("meta")`;
  torch 1.13 (Debian bookworm's python3-torch) does not, so `meta_device()`
  falls back to a TorchFunctionMode that adds device="meta" to every factory
  call (torch.empty, zeros, arange, ...).  nn.Linear(8192, 28672) then costs
  no memory: its weight is a meta tensor holding only a shape and a dtype.

* Tracing with concrete shapes.  Plain torch.fx.symbolic_trace fails on the
  common idiom `B, T, C = x.size()` (a Proxy cannot be unpacked).  The
  MetaTracer below runs every recorded call on meta tensors as it records it
  (shape propagation during tracing, as Hugging Face's HFTracer does), so a
  proxy knows its shape: `x.shape`, `x.size(i)`, `x.dim()`, `len(x)` and
  unpacking return plain ints.  The graph is therefore specialised to the
  example input shapes, which is what a loom graph is anyway (it carries
  concrete sizes).  Each node gets node.meta["val"] (a meta tensor, or a
  tuple of them, or a Python value) and node.meta["loom_module"] (the path of
  the innermost module whose forward made the call).

Data-dependent control flow (`if x.sum() > 0`) still cannot be traced; it
raises torch.fx's TraceError, which the CLI reports with the location.
"""

import contextlib
import os
import sys

import torch
import torch.fx
from torch.fx import _symbolic_trace as _st
from torch.fx.node import map_aggregate

_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))

# Factory functions whose device the meta mode forces (torch 1.13 path).
_FACTORIES = {
    torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn,
    torch.randint, torch.arange, torch.linspace, torch.logspace, torch.eye,
    torch.tensor, torch.empty_strided, torch.range, torch.randperm,
}


class _MetaFactoryMode(torch.overrides.TorchFunctionMode):
    """Routes tensor factories to the meta device (torch < 2.0 fallback)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _FACTORIES:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


@contextlib.contextmanager
def meta_device():
    """Context in which new tensors (hence module parameters) live on meta."""
    if hasattr(torch, "get_default_device") or _torch_major() >= 2:
        with torch.device("meta"):
            yield
    else:
        with _MetaFactoryMode():
            yield


def _sdpa_reference(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                    scale=None):
    """F.scaled_dot_product_attention for torch < 2.0 (Debian bookworm ships
    1.13), so that models written for torch 2 trace. It dispatches through
    __torch_function__, hence traces as one call (lowered to loom's fused
    attention op); on meta tensors it computes the result's shape."""
    args = (query, key, value)
    if torch.overrides.has_torch_function(args):
        return torch.overrides.handle_torch_function(
            _sdpa_reference, args, query, key, value, attn_mask=attn_mask,
            dropout_p=dropout_p, is_causal=is_causal, scale=scale)
    s = scale if scale is not None else query.shape[-1] ** -0.5
    w = torch.matmul(query, key.transpose(-2, -1)) * s
    if attn_mask is not None:
        w = w + attn_mask
    return torch.matmul(torch.softmax(w, dim=-1), value)


_sdpa_reference.__name__ = "scaled_dot_product_attention"
_sdpa_reference.__module__ = "torch.nn.functional"


def ensure_sdpa():
    """Installs the reference SDPA where torch lacks one; returns it or the
    real one."""
    import torch.nn.functional as F
    if not hasattr(F, "scaled_dot_product_attention"):
        F.scaled_dot_product_attention = _sdpa_reference
    return F.scaled_dot_product_attention


ensure_sdpa()


def _torch_major():
    try:
        return int(torch.__version__.split(".")[0])
    except ValueError:
        return 1


def _to_meta(v):
    """Real tensors among call arguments (constants made during tracing)
    join the meta world so that meta execution never mixes devices."""
    if isinstance(v, torch.Tensor) and v.device.type != "meta":
        return v.to("meta")
    return v


class MetaProxy(torch.fx.Proxy):
    """A Proxy that also holds the meta value of what it stands for, so that
    shape queries are answered with concrete ints instead of new nodes."""

    @property
    def _val(self):
        return self.node.meta.get("val")

    def _tensor(self):
        v = self._val
        if not isinstance(v, torch.Tensor):
            bad = _first_failure(self.node)
            if bad is not None:
                raise TypeError("the call at %s fails on the example shapes: %s"
                                % (bad.meta.get("loom_where", "?"), bad.meta["meta_error"]))
            raise TypeError("%s is not a tensor" % self.node.name)
        return v

    @property
    def shape(self):
        return self._tensor().shape

    def size(self, dim=None):
        t = self._tensor()
        return t.size() if dim is None else t.size(dim)

    def dim(self):
        return self._tensor().dim()

    @property
    def ndim(self):
        return self._tensor().dim()

    def numel(self):
        return self._tensor().numel()

    @property
    def dtype(self):
        return self._tensor().dtype

    @property
    def device(self):
        return self._tensor().device

    @property
    def is_cuda(self):
        return False

    def __len__(self):
        v = self._val
        if isinstance(v, torch.Tensor):
            return v.shape[0]
        if isinstance(v, (tuple, list)):
            return len(v)
        return super().__len__()

    def __iter__(self):
        v = self._val
        if isinstance(v, torch.Tensor):
            return (self[i] for i in range(v.shape[0]))
        if isinstance(v, (tuple, list)):
            return (self[i] for i in range(len(v)))
        return super().__iter__()

    def __bool__(self):
        v = self._val
        if isinstance(v, (bool, int, float)):
            return bool(v)
        return super().__bool__()


class MetaTracer(torch.fx.Tracer):
    """symbolic tracing with meta execution of every recorded call.

    leaf_classes: extra module classes kept as single call_module nodes
    (norm modules written by the user, e.g. LlamaRMSNorm).
    """

    def __init__(self, leaf_classes=()):
        super().__init__()
        self.record_stack_traces = False   # we keep our own, shorter one
        self._leaf_classes = tuple(leaf_classes)
        self._module_stack = [""]
        self._inputs = {}

    # --- module handling -------------------------------------------------
    def is_leaf_module(self, m, qualname):
        if isinstance(m, self._leaf_classes):
            return True
        return super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        path = self.path_of_module(m)
        self._module_stack.append(path)
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self._module_stack.pop()

    # --- proxies -----------------------------------------------------------
    def proxy(self, node):
        return MetaProxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        # Always a MetaProxy (parameters included), so shapes stay concrete.
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr)
        node = p.node
        node.meta["loom_module"] = self._module_stack[-1]
        node.meta["loom_where"] = _user_frame()
        with _untraced():
            node.meta["val"] = self._run_meta(node, kind, target, args, kwargs)
        return p

    def _run_meta(self, node, kind, target, args, kwargs):
        def val(a):
            if isinstance(a, torch.fx.Proxy):
                return a.node.meta.get("val")
            return _to_meta(a)

        a = map_aggregate(args, val)
        k = map_aggregate(kwargs, val)
        with torch.no_grad():
            if kind == "placeholder":
                return self._inputs.get(target)
            if kind == "get_attr":
                obj = self.root
                for part in target.split("."):
                    obj = getattr(obj, part)
                return _to_meta(obj) if isinstance(obj, torch.Tensor) else obj
            try:
                if kind == "call_function":
                    return target(*a, **k)
                if kind == "call_method":
                    return getattr(a[0], target)(*a[1:], **k)
                if kind == "call_module":
                    return self.root.get_submodule(target)(*a, **k)
            except Exception as e:  # no meta kernel, or a genuine shape error
                node.meta["meta_error"] = "%s: %s" % (type(e).__name__, e)
                return None
        return None

    def trace_with_inputs(self, root, inputs, concrete_args=None):
        """Traces root.forward; inputs maps argument name -> meta tensor."""
        self._inputs = dict(inputs)
        return self.trace(root, concrete_args=concrete_args)


def _first_failure(node, seen=None):
    """The earliest node upstream of node whose meta execution failed."""
    seen = set() if seen is None else seen
    if node in seen:
        return None
    seen.add(node)
    for a in node.all_input_nodes:
        bad = _first_failure(a, seen)
        if bad is not None:
            return bad
    return node if "meta_error" in node.meta else None


@contextlib.contextmanager
def _untraced():
    """While tracing, torch.fx patches nn.Module.__call__ and __getattr__ so
    that module calls and parameter reads are recorded. Meta execution of a
    recorded call must not record anything, so it runs with the originals."""
    patched = (torch.nn.Module.__getattr__, torch.nn.Module.__call__)
    torch.nn.Module.__getattr__ = _st._orig_module_getattr
    torch.nn.Module.__call__ = _st._orig_module_call
    try:
        yield
    finally:
        torch.nn.Module.__getattr__, torch.nn.Module.__call__ = patched


def _user_frame():
    """"file:line (function)" of the innermost frame outside torch and loomfx:
    the line of model code that made the call being recorded."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_TORCH) and not fn.startswith(_HERE):
            return "%s:%d (%s)" % (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return "?"


def trace_module(model, inputs, concrete_args=None, leaf_classes=()):
    """Returns a torch.fx.Graph of model(**inputs) with meta values on nodes.

    inputs: ordered {name: meta tensor} for forward's tensor arguments;
    concrete_args: {name: value} for the other arguments (their defaults).
    """
    tracer = MetaTracer(leaf_classes)
    graph = tracer.trace_with_inputs(model, inputs, concrete_args)
    return graph


def prune(graph):
    """Removes calls whose results nothing uses (dead code the model computes
    and drops, and the guards fx adds for concrete arguments). In-place
    methods (name ending in "_") are kept: they have effects."""
    for node in reversed(list(graph.nodes)):
        if node.op in ("placeholder", "output") or node.users:
            continue
        if node.op == "call_method" and str(node.target).endswith("_"):
            continue
        graph.erase_node(node)
