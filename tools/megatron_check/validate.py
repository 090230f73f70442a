# Run Megatron-LM parse_args + validate_args on a command line without GPUs.
# usage: python3 validate.py ARGS...   (cwd = Megatron-LM worktree)
import sys, os
argv = sys.argv[1:]
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'runtime_stubs.py')).read())
sys.argv = ['pretrain_gpt.py'] + argv
from megatron.training import arguments as A
import megatron.training.arguments as AA
AA.get_device_arch_version = lambda: int(os.environ.get('ARCH', '9'))  # Hopper; the real one queries cuda:0
import torch
torch.cuda.get_device_capability = lambda *a: (int(os.environ.get('ARCH', '9')), 0)  # --moe-grouped-gemm check
args = A.parse_args()
A.validate_args(args, {})
print("VALID: world", args.world_size, "dp", args.data_parallel_size, "vpp", args.virtual_pipeline_model_parallel_size,
      "etp", args.expert_tensor_parallel_size, "padded? make_vocab", args.make_vocab_size_divisible_by)
if os.environ.get('TCFG'):
    from megatron.training.argument_utils import core_transformer_config_from_args
    cfg = core_transformer_config_from_args(args)
    print("TransformerConfig OK:", type(cfg).__name__, "layout", getattr(cfg, 'pipeline_model_parallel_layout', None) is not None,
          "first", cfg.num_layers_in_first_pipeline_stage, "last", cfg.num_layers_in_last_pipeline_stage)
    from megatron.training.vocab_utils import _calculate_padded_vocab_size_cached as pad
    padded = pad(args.vocab_size, args.make_vocab_size_divisible_by, args.tensor_model_parallel_size)
    print("facts: rotary_base", cfg.rotary_base if hasattr(cfg, 'rotary_base') else args.rotary_base,
          "norm_eps", cfg.layernorm_epsilon, "rope_scaling", args.use_rope_scaling, args.rope_scaling_factor,
          "rope_type", getattr(cfg, 'rope_type', None), "rotary_scaling_factor", getattr(cfg, 'rotary_scaling_factor', None),
          "mscale_all_dim", getattr(cfg, 'mscale_all_dim', None), "mtp", cfg.mtp_num_layers,
          "vocab", args.vocab_size, "padded", padded,
          "router", getattr(cfg, 'moe_router_score_function', None), getattr(cfg, 'moe_router_topk_scaling_factor', None),
          getattr(cfg, 'moe_router_num_groups', None), getattr(cfg, 'moe_router_group_topk', None),
          getattr(cfg, 'moe_router_load_balancing_type', None), getattr(cfg, 'moe_aux_loss_coeff', None))
