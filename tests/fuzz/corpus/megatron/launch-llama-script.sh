#!/bin/bash
# Llama-3-8B on 2 nodes of 8 GPUs
set -euo pipefail
GPUS_PER_NODE=8
NNODES=${NNODES:-2}
WORLD_SIZE=$((GPUS_PER_NODE * NNODES))
TP=2
PP=2
MBS=1
GBS=$(( 64 * 4 ))

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
    --master_addr ${MASTER_ADDR:-localhost}
    --master_port 6000
)

MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --seq-length 8192
    --max-position-embeddings 8192
    --vocab-size 128256
    --swiglu
    --normalization RMSNorm
    --position-embedding-type rope
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --sequence-parallel
    --use-distributed-optimizer
    --overlap-grad-reduce
)

TRAIN_ARGS=(
    --micro-batch-size $MBS
    --global-batch-size $GBS
    --bf16
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --lr 3e-4 --train-iters 1000
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py \
    "${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${TRAIN_ARGS[@]}" \
    --data-path "$DATA_PATH" --save "$CKPT" --load "$CKPT" "$@"
