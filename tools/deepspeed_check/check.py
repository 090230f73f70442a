# check.py CONFIG.json WORLD PP — runs DeepSpeed's own config parsing on a
# `loom export --to deepspeed` file, the way deepspeed.initialize() reads it
# on a cluster of WORLD ranks with PP pipeline stages, without GPUs.
#
# What runs is DeepSpeed's (cwd = a DeepSpeed tree): the JSON is read with
# its duplicate-key hook, then DeepSpeedConfig(config, mpu) builds every
# section model (pydantic, extra="forbid": DeepSpeedZeroConfig,
# DeepSpeedBF16Config/FP16Config, TPTrainingConfig, ...), parses the old-style
# sections and runs _configure_train_batch_size (the batch rule) and
# _do_sanity_check. World size as deepspeed.initialize passes it: with PP the
# PipelineModule's grid is the mpu, whose data-parallel size is WORLD/PP
# (loom's DeepSpeed exports have no TP with PP); without PP, AutoTP training
# passes no mpu and DeepSpeedConfig counts every rank
# (deepspeed.comm.get_world_size). An expert_parallel section is checked as
# the engine's _configure_expert_parallel does (validate_autoep_config with
# the ZeRO stage, then build_folding_spec / validate_folding_global).
#
# Two checks DeepSpeed's parsing leaves out, derived from its own code: every
# key of the file must be read by it (DeepSpeedConfig ignores unknown
# top-level keys and the old-style sections ignore unknown sub-keys; a
# section handed whole to a pydantic model counts as read, the model forbids
# extra keys), and a value read with a non-None default must have the
# default's JSON type (values without a default, the batch sizes, are checked
# by DeepSpeed's own batch arithmetic).
#
# Prints "PASS ..." with what DeepSpeed derived, or "FAIL ...: reason".
import sys, os, json
path, world, pp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.environ.setdefault('OWN', 'deepspeed')
os.environ.setdefault('STUB', 'torch,hjson,numpy,psutil,cpuinfo,tqdm,msgpack,einops,packaging,ninja,triton')
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runtime_stubs.py')).read())
import pydantic
assert int(pydantic.VERSION.split('.')[0]) >= 2, f"DeepSpeed needs pydantic >= 2, this python has {pydantic.VERSION}"

import deepspeed.comm as dist
dist.get_rank = lambda group=None: 0  # rank 0 of an initialised job of `world` ranks
dist.get_world_size = lambda group=None: world
from deepspeed.runtime.config import DeepSpeedConfig
from deepspeed.runtime.config_utils import dict_raise_error_on_duplicate_keys
from deepspeed.runtime.zero.config import ZeroStageEnum

READ = set()      # "a.b" paths DeepSpeed read
TYPES = []        # (path, value, default) of get(name, default) reads
MISSING = object()


class Recorded(dict):
    """A dict that notes which keys DeepSpeed reads (nested ones too)."""
    _path = ''

    def _child(self, k, v):
        if isinstance(v, dict) and not isinstance(v, Recorded):
            r = Recorded(v); r._path = self._path + k + '.'
            dict.__setitem__(self, k, r)
            return r
        return v
    def __getitem__(self, k):
        READ.add(self._path + k)
        return self._child(k, dict.__getitem__(self, k))
    def get(self, k, default=None):
        READ.add(self._path + k)
        v = dict.get(self, k, MISSING)
        if v is MISSING:
            return default
        TYPES.append((self._path + k, v, default))
        return self._child(k, v)
    def __contains__(self, k):
        READ.add(self._path + k)
        return dict.__contains__(self, k)
    def keys(self):  # `name in d.keys()` reads one key, iterating reads all
        owner = self
        class Keys:
            def __contains__(_, k): return k in owner
            def __iter__(_): return iter(owner)
            def __len__(_): return dict.__len__(owner)
        return Keys()
    def __iter__(self):  # also makes `**d` (into a pydantic model) go through keys() and __getitem__
        ks = list(dict.__iter__(self))
        for k in ks:
            READ.add(self._path + k)
        return iter(ks)
    def items(self):
        return [(k, self[k]) for k in self]
    def __copy__(self):
        c = Recorded(dict.items(self)); c._path = self._path
        return c


def keys_of(d, prefix=''):
    for k, v in d.items():
        if isinstance(v, dict) and v:
            yield from keys_of(v, prefix + k + '.')
        else:
            yield prefix + k


class PipeGrid:  # deepspeed.runtime.pipe.topology.PipelineParallelGrid as the mpu, TP 1
    def get_data_parallel_world_size(self): return world // pp


name = os.path.basename(path)
try:
    with open(path) as f:
        raw = json.load(f, object_pairs_hook=dict_raise_error_on_duplicate_keys)
    cfg = DeepSpeedConfig(Recorded(raw), PipeGrid() if pp > 1 else None)
    unknown = [k for k in keys_of(raw) if k not in READ]
    if unknown:
        raise ValueError(f"keys DeepSpeed does not read: {unknown}")
    for p, v, d in TYPES:
        if d is None or isinstance(d, dict) or v is None: continue
        ok = isinstance(v, type(d)) and isinstance(v, bool) == isinstance(d, bool)
        if isinstance(d, float) and isinstance(v, int) and not isinstance(v, bool): ok = True
        if not ok:
            raise ValueError(f"{p}: {v!r} is a {type(v).__name__}, DeepSpeed's default {d!r} a {type(d).__name__}")
    ep = cfg.expert_parallel_config
    tp = cfg.tensor_parallel_config.autotp_size
    if ep.enabled:
        from deepspeed.module_inject.auto_ep_config import validate_autoep_config
        validate_autoep_config(ep, world, pp, tp, 1, zero_stage=cfg.zero_optimization_stage)
    dpw = cfg.world_size
    print(f"PASS {name}: world {world}, pp {pp}; batch check world {dpw:g}: train_batch_size "
          f"{cfg.train_batch_size} = {cfg.train_micro_batch_size_per_gpu} x {cfg.gradient_accumulation_steps} x {dpw:g}; "
          f"ZeRO {int(cfg.zero_optimization_stage)} (overlap_comm {cfg.zero_config.overlap_comm}); "
          f"bf16 {cfg.bfloat16_config.enabled} fp16 {cfg.float16_config.enabled}; autotp {tp}; "
          f"autoep {ep.autoep_size if ep.enabled else 0}; all {len(list(keys_of(raw)))} keys read")
except Exception as e:  # DeepSpeed reports with asserts, ValueError and pydantic's ValidationError
    msg = ' '.join(str(e).split())
    print(f"FAIL {name}: {type(e).__name__}: {msg}")
    sys.exit(1)
