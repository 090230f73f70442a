# Written by `loom export --to torchtitan` from llama-3-70b-tp8-pp4-w64.
# model: llama-3-70b: 80 layers, hidden 8192, 64 heads (8 kv), ffn 28672, vocab 128256
# parallelism: TP 8 x PP 4 x DP 2 x CP 1 = 64 GPUs; global batch 128 = micro-batch 1 x 64 micro-batches x DP 2, sequence 8192
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
    t.num_tokens_per_train_step = 1048576
    t.max_context_length = 8192
    t.mixed_precision_param = "bfloat16"
    t.disable_cuda_graphs = True
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=2,
        data_parallel_shard_degree=1,
        tensor_parallel_degree=8,
        enable_sequence_parallel=False,
        context_parallel_degree=1,
        pipeline_parallel_degree=4,
        pipeline_parallel_schedule="1F1B",
        num_pp_microbatches=64,
        module_fqns_per_model_part=[
            ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "layers.4", "layers.5", "layers.6", "layers.7", "layers.8", "layers.9", "layers.10", "layers.11", "layers.12", "layers.13", "layers.14", "layers.15", "layers.16", "layers.17", "layers.18", "layers.19"],
            ["layers.20", "layers.21", "layers.22", "layers.23", "layers.24", "layers.25", "layers.26", "layers.27", "layers.28", "layers.29", "layers.30", "layers.31", "layers.32", "layers.33", "layers.34", "layers.35", "layers.36", "layers.37", "layers.38", "layers.39"],
            ["layers.40", "layers.41", "layers.42", "layers.43", "layers.44", "layers.45", "layers.46", "layers.47", "layers.48", "layers.49", "layers.50", "layers.51", "layers.52", "layers.53", "layers.54", "layers.55", "layers.56", "layers.57", "layers.58", "layers.59"],
            ["layers.60", "layers.61", "layers.62", "layers.63", "layers.64", "layers.65", "layers.66", "layers.67", "layers.68", "layers.69", "layers.70", "layers.71", "layers.72", "layers.73", "layers.74", "layers.75", "layers.76", "layers.77", "layers.78", "layers.79", "norm", "lm_head"],
        ],
    )
    config.activation_checkpoint = None
    config.compile.enable = True  # element-wise ops fused, as planned
    config.compile.components = ["model", "loss"]
    return config
