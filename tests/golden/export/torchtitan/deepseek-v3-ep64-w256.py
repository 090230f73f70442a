# Written by `loom export --to torchtitan` from deepseek-v3-ep64-w256.
# model: deepseek-v3: 61 layers, hidden 7168, 128 heads (128 kv), ffn 18432, vocab 129280, 256 experts top-8
# parallelism: TP 1 x PP 1 x DP 256 x CP 1 = 256 GPUs, EP 64; global batch 512 = micro-batch 1 x 2 micro-batches x DP 256, sequence 4096
# torchtitan job config (Python; torchtitan reads no TOML since 9810191b,
# 2026-02-23). Written for pytorch/torchtitan b5bcd76c (2026-08-21).
# Put this file on PYTHONPATH and run
#   torchrun ... -m torchtitan.train --module loom_job --config loom_job
# (or MODULE=loom_job CONFIG=loom_job ./run_train.sh); data, optimizer and
# checkpointing come from torchtitan's deepseek_v3_671b recipe.
# note: multi-token prediction: torchtitan's DeepSeek-V3 does not run MTP with pipeline parallelism (models/deepseek_v3/mtp.py); the recipe's own setting is kept (none in its DeepSeek-V3 recipes), and loom's figures for torchtitan leave MTP out
import dataclasses

from torchtitan.config import ParallelismConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.deepseek_v3.config_registry import deepseek_v3_671b as recipe
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
    _set_all(model, RMSNorm.Config, eps=1e-06)
    t = config.training
    t.num_tokens_per_microbatch_per_dp_rank = 4096
    t.num_tokens_per_train_step = 2097152
    t.max_context_length = 4096
    t.mixed_precision_param = "bfloat16"
    t.disable_cuda_graphs = True
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=1,
        data_parallel_shard_degree=256,
        fsdp_reshard_after_forward="default",
        tensor_parallel_degree=1,
        context_parallel_degree=1,
        expert_parallel_degree=64,
        pipeline_parallel_degree=1,
    )
    config.activation_checkpoint = FullAC.Config()
    config.compile.enable = True  # element-wise ops fused, as planned
    config.compile.components = ["model", "loss"]
    return config
