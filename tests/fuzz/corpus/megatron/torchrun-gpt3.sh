torchrun --nproc-per-node 8 --nnodes 16 --node-rank 0 --master-addr 10.0.0.1 --master-port 6000 \
    pretrain_gpt.py \
    --tensor-model-parallel-size 8 \
    --pipeline-model-parallel-size 8 \
    --num-layers 96 --hidden-size 12288 --num-attention-heads 96 \
    --seq-length 2048 --max-position-embeddings 2048 \
    --micro-batch-size 1 --global-batch-size 1536 \
    --vocab-size 51200 \
    --recompute-granularity selective \
    --sequence-parallel --fp16 \
    --lr 6.0e-5 --min-lr 6.0e-6 --lr-decay-style cosine --train-iters 500000
