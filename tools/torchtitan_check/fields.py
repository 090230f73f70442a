# fields.py COMMIT DATE > tests/data/torchtitan_config_fields.txt — the
# torchtitan names loom's job configs use, from torchtitan's own code (cwd =
# a torchtitan tree), so that the test suite can run the exports against a
# stand-in built from them (tests/export_cli.sh) without torchtitan.
#
# For each config class a job config touches: its fields in order, with
# the annotation's kind (bool, int, float: an integer is a number too, str,
# enum:A,B for a Literal, list, config: another config class, any; a leading
# ? allows None). And every module-level name the job configs import (the
# recipes, model_registry). A name that is gone fails here.
import sys, os, typing, dataclasses
os.environ.setdefault('OWN', 'torchtitan')
os.environ.setdefault('STUB', 'torch,tyro,numpy,safetensors,transformers,datasets,tokenizers,'
                      'tensorboard,wandb,fsspec,einops,triton,torchdata,blobfile,tiktoken,'
                      'sentencepiece,psutil,spmd_types,grain,torchao')
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runtime_stubs.py')).read())
import importlib
commit, date = sys.argv[1], sys.argv[2]

CLASSES = [('torchtitan.config', 'ParallelismConfig'), ('torchtitan.config', 'TrainingConfig'),
           ('torchtitan.config', 'CompileConfig'),
           ('torchtitan.trainer', 'Trainer.Config'),
           ('torchtitan.distributed.activation_checkpoint', 'FullAC.Config'),
           ('torchtitan.distributed.activation_checkpoint', 'SelectiveAC.Config'),
           ('torchtitan.models.common.nn_modules', 'RMSNorm.Config'),
           ('torchtitan.models.common.rope', 'RoPE.Config')]
NAMES = [('torchtitan.models.llama3.config_registry', n) for n in ('llama3_8b', 'llama3_70b', 'llama3_405b')] + \
        [('torchtitan.models.deepseek_v3.config_registry', 'deepseek_v3_671b'),
         ('torchtitan.models.llama3', 'model_registry')]


def kind(t):
    o, a = typing.get_origin(t), typing.get_args(t)
    if o is typing.Annotated: return kind(a[0])
    if o is typing.Union or type(t).__name__ == 'UnionType':
        rest = [x for x in a if x is not type(None)]
        k = kind(rest[0]) if len(rest) == 1 else 'any'
        return ('?' + k) if type(None) in a else k
    if o is typing.Literal: return 'enum:' + ','.join(map(str, a))
    if o in (list, tuple): return 'list'
    for py, k in ((bool, 'bool'), (int, 'int'), (float, 'float'), (str, 'str')):
        if t is py: return k
    if dataclasses.is_dataclass(t): return 'config'
    return 'any'


print(f"""# torchtitan config fields and names loom's job configs use.
#
# Source: pytorch/torchtitan at commit {commit} ({date}).
# Generated (not written by hand) by tools/torchtitan_check/fields.py from
# torchtitan's own classes (dataclasses.fields and their annotations).
#   class MODULE QUALNAME       a config class (keyword-only, slotted)
#   field NAME KIND             its fields, in order; KIND: bool, int, float,
#                               str, enum:A,B, list, config, any; ?: or None
#   name MODULE NAME            a module-level name (recipe, model_registry)
# tests/export_cli.sh builds its stand-in torchtitan from this file.""")
for mod, qual in CLASSES:
    cls = importlib.import_module(mod)
    for part in qual.split('.'):
        cls = getattr(cls, part)
    print('class', mod, qual)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:
        hints = {}
    for f in dataclasses.fields(cls):
        print('field', f.name, kind(hints.get(f.name, f.type)))
for mod, n in NAMES:
    assert callable(getattr(importlib.import_module(mod), n)), (mod, n)
    print('name', mod, n)
