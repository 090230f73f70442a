# Written by `loom export --to torchtitan` from tests/golden/export/llama-3-70b-tp8.plan.json.
# model: llama-3-70b: 80 layers, hidden 8192, 64 heads (8 kv), ffn 28672, vocab 128256
# parallelism: TP 8 x PP 1 x DP 8 x CP 1 = 64 GPUs; global batch 64 = micro-batch 1 x 8 micro-batches x DP 8, sequence 8192
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# torchtitan job config (Python; torchtitan reads no TOML since 9810191b,
# 2026-02-23). Written for pytorch/torchtitan b5bcd76c (2026-08-21).
# Put this file on PYTHONPATH and run
#   torchrun ... -m torchtitan.train --module loom_job --config loom_job
# (or MODULE=loom_job CONFIG=loom_job ./run_train.sh); data, optimizer and
# checkpointing come from torchtitan's llama3_70b recipe.
import dataclasses

from torchtitan.config import ParallelismConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.llama3.config_registry import llama3_70b as recipe
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
    model = config.model_spec.model
    _set_all(model, RMSNorm.Config, eps=1e-05)
    _set_all(model, RoPE.Config, theta=500000, scaling="none")
    t = config.training
    t.num_tokens_per_microbatch_per_dp_rank = 8192
    t.num_tokens_per_train_step = 524288
    t.max_context_length = 8192
    t.mixed_precision_param = "bfloat16"
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=1,
        data_parallel_shard_degree=8,
        fsdp_reshard_after_forward="never",
        tensor_parallel_degree=8,
        enable_sequence_parallel=False,
        context_parallel_degree=1,
        pipeline_parallel_degree=1,
    )
    config.activation_checkpoint = FullAC.Config()
    config.compile.enable = True  # element-wise ops fused, as planned
    config.compile.components = ["model", "loss"]
    return config
