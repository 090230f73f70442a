# Written by `loom export --to torchtitan` from llama-3.1-405b-tp8-w512.
# model: llama-3.1-405b: 126 layers, hidden 16384, 128 heads (8 kv), ffn 53248, vocab 128256
# parallelism: TP 8 x PP 1 x DP 64 x CP 1 = 512 GPUs; global batch 256 = micro-batch 1 x 4 micro-batches x DP 64, sequence 8192
# torchtitan job config (Python; torchtitan reads no TOML since 9810191b,
# 2026-02-23). Written for pytorch/torchtitan b5bcd76c (2026-08-21).
# Put this file on PYTHONPATH and run
#   torchrun ... -m torchtitan.train --module loom_job --config loom_job
# (or MODULE=loom_job CONFIG=loom_job ./run_train.sh); data, optimizer and
# checkpointing come from torchtitan's llama3_405b recipe.
# note: the llama3_405b recipe trains its linear layers in float8; the model spec is rebuilt without that converter, as the plan is bf16
import dataclasses

from torchtitan.config import ParallelismConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.llama3.config_registry import llama3_405b as recipe
from torchtitan.models.llama3 import model_registry
from torchtitan.models.common.nn_modules import RMSNorm
from torchtitan.models.common.rope import RoPE
from torchtitan.trainer import Trainer


def _set_all(cfg, cls, **values):
    """Sets values on every cls config inside cfg (one per layer)."""
    seen = set()

    def walk(o):
        if id(o) in seen:
            return
        seen.add(id(o))
        if isinstance(o, cls):
            for k, v in values.items():
                setattr(o, k, v)
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            for fld in dataclasses.fields(o):
                walk(getattr(o, fld.name))
        elif isinstance(o, (list, tuple)):
            for x in o:
                walk(x)

    walk(cfg)


def loom_job() -> Trainer.Config:
    config = recipe()
    config.model_spec = model_registry("405B")  # without the recipe's Float8 linear layers
    model = config.model_spec.model
    _set_all(model, RMSNorm.Config, eps=1e-05)
    _set_all(model, RoPE.Config, theta=500000, scaling="llama", scaling_factor=8, low_freq_factor=1, high_freq_factor=4)
    t = config.training
    t.num_tokens_per_microbatch_per_dp_rank = 8192
    t.num_tokens_per_train_step = 2097152
    t.max_context_length = 8192
    t.mixed_precision_param = "bfloat16"
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=1,
        data_parallel_shard_degree=64,
        fsdp_reshard_after_forward="default",
        tensor_parallel_degree=8,
        enable_sequence_parallel=True,
        context_parallel_degree=1,
        pipeline_parallel_degree=1,
    )
    config.activation_checkpoint = FullAC.Config()
    config.compile.enable = True  # element-wise ops fused, as planned
    config.compile.components = ["model", "loss"]
    return config
