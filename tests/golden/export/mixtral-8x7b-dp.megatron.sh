#!/usr/bin/env bash
# Written by `loom export --to megatron` from tests/golden/export/mixtral-8x7b-dp.plan.json.
# model: mixtral-8x7b: 32 layers, hidden 4096, 32 heads (8 kv), ffn 14336, vocab 32000, 8 experts top-2
# parallelism: TP 1 x PP 1 x DP 32 x CP 1 = 32 GPUs, EP 4; global batch 128 = micro-batch 1 x 4 micro-batches x DP 32, sequence 4096
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# Argument names checked against NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22).
# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,
# --train-iters, --lr, ...) are not part of the plan: pass them to this
# script and they are appended to the command line.
# note: ZeRO-3 runs as Megatron FSDP, which must not run with CUDA_DEVICE_MAX_CONNECTIONS=1
# note: run the script once on each of the 4 nodes with NODE_RANK, MASTER_ADDR and MASTER_PORT set
set -euo pipefail

torchrun --nnodes 4 --nproc-per-node 8 \
    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
    pretrain_gpt.py \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 1 \
    --context-parallel-size 1 \
    --expert-model-parallel-size 4 \
    --micro-batch-size 1 \
    --global-batch-size 128 \
    --recompute-granularity full \
    --recompute-method uniform \
    --recompute-num-layers 1 \
    --overlap-grad-reduce \
    --use-megatron-fsdp \
    --data-parallel-sharding-strategy optim_grads_params \
    --ckpt-format fsdp_dtensor \
    --bf16 \
    --num-layers 32 \
    --hidden-size 4096 \
    --ffn-hidden-size 14336 \
    --num-attention-heads 32 \
    --group-query-attention \
    --num-query-groups 8 \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --vocab-size 32000 \
    --normalization RMSNorm \
    --norm-epsilon 1e-05 \
    --position-embedding-type rope \
    --rotary-base 1000000 \
    --swiglu \
    --disable-bias-linear \
    --attention-dropout 0 \
    --hidden-dropout 0 \
    --untie-embeddings-and-output-weights \
    --num-experts 8 \
    --moe-router-topk 2 \
    --moe-ffn-hidden-size 14336 \
    --moe-grouped-gemm \
    --moe-token-dispatcher-type alltoall \
    --moe-router-load-balancing-type aux_loss \
    --moe-aux-loss-coeff 0.02 \
    "$@"
