#!/usr/bin/env bash
# Written by `loom export --to megatron` from tests/golden/export/llama-3.1-405b-pp16.plan.json.
# model: llama-3.1-405b: 126 layers, hidden 16384, 128 heads (8 kv), ffn 53248, vocab 128256
# parallelism: TP 8 x PP 16 x DP 4 x CP 1 = 512 GPUs; global batch 256 = micro-batch 1 x 64 micro-batches x DP 4, sequence 8192
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# Argument names checked against NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22).
# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,
# --train-iters, --lr, ...) are not part of the plan: pass them to this
# script and they are appended to the command line.
# note: run the script once on each of the 64 nodes with NODE_RANK, MASTER_ADDR and MASTER_PORT set
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

torchrun --nnodes 64 --nproc-per-node 8 \
    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
    pretrain_gpt.py \
    --tensor-model-parallel-size 8 \
    --pipeline-model-parallel-size 16 \
    --context-parallel-size 1 \
    --sequence-parallel \
    --decoder-first-pipeline-num-layers 7 \
    --decoder-last-pipeline-num-layers 7 \
    --micro-batch-size 1 \
    --global-batch-size 256 \
    --recompute-granularity full \
    --recompute-method uniform \
    --recompute-num-layers 1 \
    --overlap-grad-reduce \
    --use-distributed-optimizer \
    --bf16 \
    --num-layers 126 \
    --hidden-size 16384 \
    --ffn-hidden-size 53248 \
    --num-attention-heads 128 \
    --group-query-attention \
    --num-query-groups 8 \
    --seq-length 8192 \
    --max-position-embeddings 8192 \
    --vocab-size 128256 \
    --make-vocab-size-divisible-by 32 \
    --normalization RMSNorm \
    --norm-epsilon 1e-05 \
    --position-embedding-type rope \
    --rotary-base 500000 \
    --use-rope-scaling \
    --rope-scaling-factor 8 \
    --swiglu \
    --disable-bias-linear \
    --attention-dropout 0 \
    --hidden-dropout 0 \
    --untie-embeddings-and-output-weights \
    "$@"
