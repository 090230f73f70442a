# Build Megatron-LM's argparse parser without GPUs or a real torch: torch and
# every optional/missing third-party module are replaced by permissive stubs
# (../runtime_stubs.py). Dumps each long option as NAME KIND (gen_megatron_args.sh format).
import sys, os, argparse, json
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runtime_stubs.py')).read())
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
