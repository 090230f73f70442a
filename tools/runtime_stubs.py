# runtime_stubs.py — lets a runtime's Python sources (Megatron-LM, DeepSpeed,
# torchtitan) be imported on a machine without a GPU, torch or the runtime's
# other third-party dependencies, so that its own argument parser and config
# classes can be run on loom's exports (tools/*_check/).
#
# Only imports are faked: every top-level module named in $STUB (comma list,
# default "torch") is replaced by a permissive stub whose attributes are more
# stubs (lowercase names), classes (capitalised names) or mocks (calls). The
# runtime's own package ($OWN, default "megatron") and the standard library
# are never stubbed, so the code under test is the runtime's. A stub can be a
# base class (__mro_entries__), and torch's dtypes are instances of
# torch.dtype so that config models typed `torch.dtype` accept their defaults.
#
# Use: exec(open(".../runtime_stubs.py").read()) before importing the runtime
# (exec, not import: the checks run with the runtime's tree as cwd).
import sys, os, types, importlib.abc, importlib.machinery
from unittest import mock as _mock


class _M(_mock.MagicMock):
    """A mock whose comparisons are False (version checks take the old path)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        for op in ('__lt__', '__gt__', '__le__', '__ge__'):
            getattr(self, op).return_value = False

    def _get_child_mock(self, **kw):
        n = str(kw.get('name', ''))
        if n.startswith('__'):
            return _mock.MagicMock(**kw)
        return _M(**kw)


class mock:  # namespace shim
    MagicMock = _M


import typing


class _AnyMeta(typing._ProtocolMeta):
    def __getattr__(cls, name):
        if name.startswith('__'): raise AttributeError(name)
        return mock.MagicMock(name=f"{cls.__name__}.{name}")
    def __or__(cls, other): return cls
    def __ror__(cls, other): return cls
    def __getitem__(cls, k): return cls


class _Any(metaclass=_AnyMeta):
    def __init__(self, *a, **k): pass
    def __getattr__(self, name):
        if name.startswith('__'): raise AttributeError(name)
        return mock.MagicMock()
    def __call__(self, *a, **k): return mock.MagicMock()


class _Stub(types.ModuleType):
    def __call__(self, *a, **k): return mock.MagicMock()
    def __iter__(self): return iter(())
    def __bool__(self): return True
    def __or__(self, o): return self
    def __ror__(self, o): return self
    def __getitem__(self, k): return self
    def __mro_entries__(self, bases):  # `class X(torch.something):`
        return (_AnyMeta(self.__name__.rsplit('.', 1)[-1], (_Any,), {'__module__': self.__name__}),)
    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        if name[:1].isupper():
            v = _AnyMeta(name, (_Any,), {'__module__': self.__name__})
        else:
            v = _Stub(f"{self.__name__}.{name}"); v.__path__ = []
        setattr(self, name, v)
        return v


FORCE = tuple(os.environ.get('STUB', 'torch').split(','))
OWN = tuple(os.environ.get('OWN', 'megatron').split(','))
STUBBED = []


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        top = fullname.split('.')[0]
        if top in OWN or top in sys.stdlib_module_names or top.startswith('_'):
            return None
        if top not in FORCE:
            return None
        STUBBED.append(fullname)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
    def create_module(self, spec):
        m = _Stub(spec.name); m.__path__ = []
        m.__version__ = '2.9.0'
        return m
    def exec_module(self, module): pass


sys.meta_path.insert(0, Finder())

if not hasattr(typing, 'override'):
    typing.override = lambda f: f  # Python 3.12 (PEP 698)
sys.path.insert(0, os.getcwd())
if 'torch' in FORCE:
    import torch as _t
    if isinstance(_t, _Stub):
        for _n in ('dtype', 'device', 'Size'):
            setattr(_t, _n, _AnyMeta(_n, (_Any,), {'__module__': 'torch'}))
        for _n in ('float16', 'half', 'bfloat16', 'float32', 'float', 'float64', 'int8', 'uint8',
                   'int32', 'int64', 'bool', 'float8_e4m3fn', 'float8_e5m2'):
            setattr(_t, _n, _t.dtype())
