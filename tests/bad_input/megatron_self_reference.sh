X=X
Y=$((X + 1))
torchrun --nproc-per-node 8 pretrain_gpt.py
