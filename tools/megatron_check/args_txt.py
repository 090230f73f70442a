# args_txt.py ARGS.json COMMIT DATE > planner/export/megatron_args.txt
# Turns dump_args.py's JSON (every option of Megatron-LM's real parser) into
# loom's "NAME KIND" list, grouped by argparse group in parser order.
import json, sys
d = json.load(open(sys.argv[1]))
commit, date = sys.argv[2], sys.argv[3]
print(f"""# Megatron-LM command-line argument names, one per line: NAME KIND.
#
# Source: NVIDIA/Megatron-LM, megatron/training/arguments.py (add_megatron_arguments)
# at commit {commit} (main, {date}).
# Generated (not written by hand) by building the argparse parser with
# torch/triton/numpy stubbed (tools/megatron_check/dump_args.py) and listing
# parser._actions in order, grouped by argparse group; the dataclass-derived
# groups (ArgumentGroupFactory) are included; every option string of an
# action is listed (aliases and --no-/--disable- twins separately).
#
# KIND says how many values follow the name on a command line:
#   flag   none (store_true / store_false / BooleanOptionalAction)
#   int    one integer          float  one number         str  one word
#   list   zero or more words (nargs='*' / nargs='+')""")
group = None
for a in d:
    if a['group'] != group:
        group = a['group']
        print(f"## {group}")
    print(a['name'], a['kind'])
