A=$(( (-9223372036854775807 - 1) / -1 ))
torchrun --nproc-per-node 8 pretrain_gpt.py
