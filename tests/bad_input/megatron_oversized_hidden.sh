torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 \
    --hidden-size 1099511627776 --num-attention-heads 8 --vocab-size 32000 \
    --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8
