# Build Megatron-LM's argparse parser without GPUs or a real torch: torch and
# every optional/missing third-party module are replaced by permissive stubs.
# Dumps each long option as NAME KIND (gen_megatron_args.sh format).
import sys, os, types, importlib.abc, importlib.machinery, argparse, json
from unittest import mock as _mock
class _M(_mock.MagicMock):
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
STUBBED = []
class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        top = fullname.split('.')[0]
        if top == 'megatron' or top in sys.stdlib_module_names or top.startswith('_'):
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

import typing
if not hasattr(typing, 'override'):
    typing.override = lambda f: f  # Python 3.12 (PEP 698)
sys.path.insert(0, os.getcwd())
sys.argv = ['pretrain_gpt.py']
from megatron.training import arguments as A
parser = argparse.ArgumentParser(allow_abbrev=False)
parser = A.add_megatron_arguments(parser)
out = []
for act in parser._actions:
    for opt in act.option_strings:
        if not opt.startswith('--') or opt == '--help': continue
        if act.nargs == 0:
            k = 'flag'
        elif act.nargs in ('*', '+') or (isinstance(act.nargs, int) and act.nargs > 1):
            k = 'list'
        elif act.nargs == '?':
            k = 'opt'
        elif act.type is int: k = 'int'
        elif act.type is float: k = 'float'
        else: k = 'str'
        out.append(dict(name=opt, kind=k, action=type(act).__name__, nargs=act.nargs,
                        type=getattr(act.type, '__name__', repr(act.type)), dest=act.dest,
                        default=repr(act.default)[:80], choices=list(map(str, act.choices)) if act.choices else None,
                        group=None))
# record group titles
for g in parser._action_groups:
    for act in g._group_actions:
        for o in out:
            if o['dest'] == act.dest and o['name'] in act.option_strings: o['group'] = g.title
json.dump(out, open(os.environ.get('OUT', 'args.json'), 'w'), indent=0)
print(len(out), 'options; stubbed top-level modules:', sorted(set(s.split('.')[0] for s in STUBBED)), file=sys.stderr)
