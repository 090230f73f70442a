# check.py JOB.py WORLD [PLAN.json] — loads a `loom export --to torchtitan`
# job config the way torchtitan does and runs torchtitan's own config checks
# on it, for a job of WORLD ranks, without GPUs (cwd = a torchtitan tree).
#
# What runs is torchtitan's: ConfigManager._load_config imports the file as
# `--module loom_job --config loom_job` and calls loom_job(), which builds
# torchtitan's recipe (config_registry) and changes it (its config classes
# are slotted keyword-only dataclasses: an unknown key is an error). Then,
# as Trainer.__init__ would before building anything on a GPU: the
# __post_init__ checks of Trainer.Config (CUDA graphs with PP/EP, ...),
# TrainingConfig and ParallelismConfig on the final values;
# ParallelDims.from_config (the degrees against WORLD, EP against the
# sparse region); the model config's update_from_config (TP against heads,
# EP against experts, context length against RoPE); the token-count rules of
# Trainer.__init__ (trainer.py: tokens per PP microbatch divisible by the
# SP/CP divisor; num_tokens_per_train_step divisible by tokens per DP rank x
# DP); module_fqns_per_model_part against torchtitan's own module names
# (_generate_llm_fqn_per_model_part for the whole model). Not run: tyro,
# which only merges command-line overrides (there are none), and the model
# family's sharding layouts (update_from_config of Llama3Model.Config etc.
# after their base's checks), which need the spmd_types package.
#
# Also checked: every field loom set has the type its annotation says, and
# with PLAN.json the step's tokens, norm epsilon and RoPE base are the
# plan's and no float8 layer trains a plan that is not fp8.
# Prints "PASS ..." with what torchtitan derived, or "FAIL ...: reason".
import sys, os, shutil, tempfile, dataclasses, typing, json
job, world = sys.argv[1], int(sys.argv[2])
plan = json.load(open(sys.argv[3])) if len(sys.argv) > 3 and sys.argv[3] else None
os.environ.setdefault('OWN', 'torchtitan')
os.environ.setdefault('STUB', 'torch,tyro,numpy,safetensors,transformers,datasets,tokenizers,'
                      'tensorboard,wandb,fsspec,einops,triton,torchdata,blobfile,tiktoken,'
                      'sentencepiece,psutil,spmd_types,grain,torchao')
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runtime_stubs.py')).read())
name = os.path.basename(job)
import torch  # the GPU queries recipes make (float8 converters): an H100 (ARCH 9) by default
torch.cuda.is_available = lambda: True
torch.version.hip = None
torch.cuda.get_device_capability = lambda *a: (int(os.environ.get('ARCH', '9')), 0)


def walk(o, seen=None):
    """Every dataclass instance in a config tree."""
    seen = set() if seen is None else seen
    if id(o) in seen: return
    seen.add(id(o))
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        yield o
        for f in dataclasses.fields(o):
            yield from walk(getattr(o, f.name, None), seen)
    elif isinstance(o, (list, tuple)):
        for x in o: yield from walk(x, seen)
    elif isinstance(o, dict):
        for x in o.values(): yield from walk(x, seen)


def type_ok(v, t):
    """Whether value v fits annotation t (the forms torchtitan's configs use)."""
    if t is typing.Any or isinstance(t, (str, typing.ForwardRef)): return True
    o = typing.get_origin(t)
    if o is typing.Literal: return v in typing.get_args(t)
    if o is typing.Annotated: return type_ok(v, typing.get_args(t)[0])
    if o in (typing.Union, getattr(__import__('types'), 'UnionType', None)):
        return any(type_ok(v, a) for a in typing.get_args(t))
    if o in (list, tuple):
        a = typing.get_args(t)
        return isinstance(v, o) and (not a or all(type_ok(x, a[0]) for x in v))
    if t is type(None): return v is None
    if t is float: return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t is int: return isinstance(v, int) and not isinstance(v, bool)
    if t in (bool, str): return isinstance(v, t)
    return True  # classes (configs, torch types): not loom's values


def check_types(o):
    try:
        hints = typing.get_type_hints(type(o), include_extras=True)
    except Exception:
        hints = {}
    for f in dataclasses.fields(o):
        v = getattr(o, f.name, None)
        t = hints.get(f.name, f.type)
        if isinstance(v, (bool, int, float, str, list, tuple)) and not type_ok(v, t):  # not stubs
            raise TypeError(f"{type(o).__qualname__}.{f.name} = {v!r} is not {t}")


try:
    d = tempfile.mkdtemp()
    shutil.copy(job, os.path.join(d, 'loom_job.py'))
    sys.path.insert(0, d)
    from torchtitan.config import ConfigManager, ParallelismConfig, TrainingConfig
    from torchtitan.trainer import Trainer
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part
    from torchtitan.models.common.nn_modules import RMSNorm
    from torchtitan.models.common.rope import RoPE
    cm = ConfigManager()
    config, rest = cm._load_config(['--module', 'loom_job', '--config', 'loom_job'])
    assert not rest
    assert isinstance(config, Trainer.Config), f"loom_job() returned {type(config).__name__}"
    cm.config = config
    cm._validate_config()
    for o in walk(config):
        check_types(o)
    par, tr = config.parallelism, config.training
    assert isinstance(par, ParallelismConfig) and isinstance(tr, TrainingConfig)
    # the checks of the constructors, on the values as loom left them
    for o in (tr, par, config):
        if hasattr(o, '__post_init__'): o.__post_init__()
    pd = ParallelDims.from_config(par, world)
    model = config.model_spec.model
    # the model family's own update_from_config adds its sharding layouts
    # (spmd_types, not importable here) after calling its base's, which
    # holds the checks: run the base's
    base = next(c for c in type(model).__mro__[1:] if 'update_from_config' in vars(c))
    base.update_from_config(model, config=config)
    # trainer.py Trainer.__init__: dense token-count evenness, then the step
    sp_div = (pd.tp if par.enable_sequence_parallel else 1) * (2 * pd.cp if pd.cp > 1 else 1)
    T = tr.num_tokens_per_microbatch_per_dp_rank
    if T % sp_div:
        raise ValueError(f"tokens per pipeline microbatch {T} not divisible by {sp_div}")
    dp = pd.dp_replicate * pd.dp_shard   # the "batch" mesh
    M = par.num_pp_microbatches if pd.pp > 1 else 1
    step = tr.num_tokens_per_train_step if tr.num_tokens_per_train_step > 0 else T * M * dp
    if step % (T * M * dp):
        raise ValueError(f"training.num_tokens_per_train_step ({step}) must be divisible by "
                         f"tokens per DP rank x DP ({T * M * dp})")
    ga = step // (T * M * dp)
    L = len(model.layers)
    parts = par.module_fqns_per_model_part
    if pd.pp > 1:
        whole = _generate_llm_fqn_per_model_part(1, L)[0]
        if parts is None:
            raise ValueError("PP without module_fqns_per_model_part (torchtitan would split by weights)")
        if [m for p in parts for m in p] != whole:
            raise ValueError(f"module_fqns_per_model_part is not torchtitan's modules in order: {parts}")
        if len(parts) % pd.pp:
            raise ValueError(f"{len(parts)} model parts for PP {pd.pp}")
    eps = sorted({n.eps for n in walk(model) if isinstance(n, RMSNorm.Config)})
    rope = sorted({(r.theta, r.scaling) for r in walk(model) if isinstance(r, RoPE.Config)})
    f8 = sorted({type(o).__qualname__ for o in walk(model) if 'float8' in type(o).__qualname__.lower()})
    if plan:
        if plan['inputs'].get('dtype', 'bf16') != 'fp8' and f8:
            raise ValueError(f"the model trains in float8 ({f8}), the plan in {plan['inputs'].get('dtype')}")
        assert step == plan['inputs']['gbs'] * plan['inputs']['seq'], (step, plan['inputs'])
        f = plan['model'].get('facts', {})
        assert eps == [f['norm_eps']], (eps, f)
        assert [t for t, _ in rope] == [f['rope_theta']], (rope, f)
    print(f"PASS {name}: world {world} = replicate {pd.dp_replicate} x shard {pd.dp_shard} x cp {pd.cp} "
          f"x tp {pd.tp} x pp {pd.pp} (ep {pd.ep}); {L} layers in {len(parts) if parts else 1} parts; "
          f"tokens/step {step} = {T} x {M} PP microbatches x DP {dp} x {ga} accumulation; "
          f"AC {type(config.activation_checkpoint).__qualname__ if config.activation_checkpoint else None}; "
          f"eps {eps}; rope {rope}; cuda graphs {'off' if tr.disable_cuda_graphs else 'on'}; float8 {f8 or 'none'}")
except Exception as e:  # torchtitan reports with ValueError, asserts, TypeError, ImportError
    msg = ' '.join(str(e).split())
    print(f"FAIL {name}: {type(e).__name__}: {msg}")
    sys.exit(1)
