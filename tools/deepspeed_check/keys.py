# keys.py COMMIT DATE > tests/data/deepspeed_config_keys.txt — the config
# keys DeepSpeed reads, from its own code (cwd = a DeepSpeed tree), so that
# the test suite can check loom's DeepSpeed exports without DeepSpeed.
#
# Top-level keys and the keys of the old-style sections (those read with
# get(name, default)) are recorded by running DeepSpeedConfig on a minimal
# config with a recording dict (check.py's): every name it asks for, with
# its default's kind (any: DeepSpeed has no default); each old-style section
# loom writes is then given so that its own reads are recorded too. The pydantic sections (zero_optimization,
# bf16, fp16, tensor_parallel) are listed from their models' fields, aliases
# included, with the annotation's kind. Kinds: bool, int, float (an integer
# is a number too), str, enum:A,B (the accepted values), dict, any; a
# leading ? allows null.
import sys, os, enum, typing
os.environ.setdefault('OWN', 'deepspeed')
os.environ.setdefault('STUB', 'torch,hjson,numpy,psutil,cpuinfo,tqdm,msgpack,einops,packaging,ninja,triton')
here = os.path.dirname(os.path.abspath(__file__))
exec(open(os.path.join(here, '..', 'runtime_stubs.py')).read())
sys.argv = [sys.argv[0], '/dev/null', '8', '1'] + sys.argv[1:]
commit, date = sys.argv[4], sys.argv[5]
src = open(os.path.join(here, 'check.py')).read()
exec(src[:src.index('name = os.path.basename(path)')])  # the recording dict and DeepSpeed's imports
from deepspeed.runtime.config_utils import DeepSpeedConfigModel
from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config
from deepspeed.runtime.tensor_parallel.config import TPTrainingConfig


def kind_of_value(v):
    if v is None: return 'any'
    if isinstance(v, bool): return 'bool'
    if isinstance(v, int): return 'int'
    if isinstance(v, float): return 'float'
    if isinstance(v, str): return 'str'
    if isinstance(v, dict): return 'dict'
    return 'any'


def kind_of_type(t):
    o, a = typing.get_origin(t), typing.get_args(t)
    if o is typing.Union or (o is not None and type(t).__name__ == 'UnionType'):
        rest = [x for x in a if x is not type(None)]
        k = kind_of_type(rest[0]) if len(rest) == 1 else 'any'
        return ('?' + k) if type(None) in a else k
    if o is typing.Literal: return 'enum:' + ','.join(map(str, a))
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return 'enum:' + ','.join(str(m.value) for m in t)
    for py, k in ((bool, 'bool'), (int, 'int'), (float, 'float'), (str, 'str'), (dict, 'dict')):
        if t is py or o is py: return k
    if isinstance(t, type) and issubclass(t, DeepSpeedConfigModel): return 'dict'
    return 'any'


rows = {}
def record(raw):
    READ.clear(); TYPES.clear()
    cfg = dict(train_micro_batch_size_per_gpu=1, **raw)
    DeepSpeedConfig(Recorded(cfg), None)
    return set(READ)

# every name DeepSpeedConfig asks for, with its default (get(name, default))
defaults = {}
_get = Recorded.get
def get(self, k, default=None):
    defaults.setdefault(self._path + k, default)
    return _get(self, k, default)
Recorded.get = get
top = set(record({}))
for p in sorted(top):
    rows[p] = kind_of_value(defaults.get(p))
# the old-style sections loom writes, given with one unknown key (an empty
# section reads as absent in some) so that their reads show
for sec in ('activation_checkpointing', 'expert_parallel', 'pipeline'):
    rows[sec] = 'dict'
    for p in record({sec: {'loom-probe': 0}}):
        if p.startswith(sec + '.') and not p.endswith('.loom-probe'):
            rows[p] = kind_of_value(defaults.get(p))
from deepspeed.runtime.config import get_pipeline_config   # pipeline: copied whole over its defaults
for k, v in get_pipeline_config({}).items():
    rows['pipeline.' + k] = kind_of_value(v)
# the pydantic sections, from their models
for sec, model in (('zero_optimization', DeepSpeedZeroConfig), ('bf16', DeepSpeedBF16Config),
                   ('fp16', DeepSpeedFP16Config), ('tensor_parallel', TPTrainingConfig)):
    rows[sec] = 'dict'
    for n, f in model.model_fields.items():
        k = kind_of_type(f.annotation)
        rows[f'{sec}.{n}'] = k
        if f.alias: rows[f'{sec}.{f.alias}'] = k

print(f"""# DeepSpeed config keys: PATH KIND, one per line.
#
# Source: deepspeedai/DeepSpeed at commit {commit} ({date}).
# Generated (not written by hand) by tools/deepspeed_check/keys.py from
# DeepSpeed's own code: the names DeepSpeedConfig reads (top level and the
# old-style sections activation_checkpointing, expert_parallel, pipeline,
# recorded while it parses) and the fields of the pydantic models of
# zero_optimization, bf16, fp16 and tensor_parallel (aliases included).
# KIND: bool, int, float (an integer is a number too), str, enum:A,B, dict,
# any; a leading ? allows null. tests/export_cli.sh checks every key of
# every DeepSpeed golden against this list.""")
for p in sorted(rows):
    print(p, rows[p])
