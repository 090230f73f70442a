#!/usr/bin/env bash
# Written by `loom export --to megatron` from tests/golden/export/deepseek-v3-pp16.plan.json.
# model: deepseek-v3: 61 layers, hidden 7168, 128 heads (128 kv), ffn 18432, vocab 129280, 256 experts top-8
# parallelism: TP 2 x PP 16 x DP 8 x CP 1 = 256 GPUs, EP 8; global batch 256 = micro-batch 1 x 32 micro-batches x DP 8, sequence 4096
# loom predicts 12.5 s per step and 50.0 GiB per GPU.
# Argument names checked against NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22).
# Data, tokenizer and optimizer arguments (--data-path, --tokenizer-type,
# --train-iters, --lr, ...) are not part of the plan: pass them to this
# script and they are appended to the command line.
# note: multi-token prediction: 1 MTP layer(s) on the last pipeline stage (--mtp-num-layers); loom's memory and time figures price them there (a decoder layer, eh_proj, a second output layer and loss, and the embedding table's copy)
# note: run the script once on each of the 32 nodes with NODE_RANK, MASTER_ADDR and MASTER_PORT set
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=1

torchrun --nnodes 32 --nproc-per-node 8 \
    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
    pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 16 \
    --context-parallel-size 1 \
    --expert-model-parallel-size 8 \
    --expert-tensor-parallel-size 1 \
    --sequence-parallel \
    --pipeline-model-parallel-layout 'E|(t*4|)*14t*5,mL' \
    --micro-batch-size 1 \
    --global-batch-size 256 \
    --recompute-granularity full \
    --recompute-method uniform \
    --recompute-num-layers 1 \
    --overlap-grad-reduce \
    --use-distributed-optimizer \
    --bf16 \
    --num-layers 61 \
    --hidden-size 7168 \
    --ffn-hidden-size 18432 \
    --num-attention-heads 128 \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --vocab-size 129280 \
    --normalization RMSNorm \
    --norm-epsilon 1e-06 \
    --position-embedding-type rope \
    --rotary-base 10000 \
    --rope-type yarn \
    --rotary-scaling-factor 40 \
    --mscale 1 \
    --mscale-all-dim 1 \
    --swiglu \
    --disable-bias-linear \
    --attention-dropout 0 \
    --hidden-dropout 0 \
    --multi-latent-attention \
    --q-lora-rank 1536 \
    --kv-lora-rank 512 \
    --qk-head-dim 128 \
    --qk-pos-emb-head-dim 64 \
    --v-head-dim 128 \
    --untie-embeddings-and-output-weights \
    --num-experts 256 \
    --moe-router-topk 8 \
    --moe-ffn-hidden-size 2048 \
    --moe-shared-expert-intermediate-size 2048 \
    --moe-layer-freq '([0]*3+[1]*58)' \
    --moe-grouped-gemm \
    --moe-token-dispatcher-type alltoall \
    --moe-router-score-function sigmoid \
    --moe-router-enable-expert-bias \
    --moe-router-topk-scaling-factor 2.5 \
    --moe-router-num-groups 8 \
    --moe-router-group-topk 4 \
    --moe-router-load-balancing-type seq_aux_loss \
    --moe-aux-loss-coeff 0.001 \
    --mtp-num-layers 1 \
    "$@"
