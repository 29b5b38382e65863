# Reads a dev_exchange.py log run with DEV_GROUPS (columns codec_tT_gG) and prints, per (prefix, kind, size, codec),
# the time at each group count, the rule's (g0) and the best, with best / rule.
#   python3 lab/scripts/groups_table.py LOG [PREFIX_FIELDS]   (words before dev_exchange's own, default 1)
import collections, sys

log, nprefix = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
rows = collections.defaultdict(dict)
heads = {}
for line in open(log):
    f = line.split()
    if len(f) <= nprefix + 2:
        continue
    prefix, rest = tuple(f[:nprefix]), f[nprefix:]
    if rest[0] == "kind":
        heads[prefix] = rest[2:]  # nccl, then codec_tT_gG
        continue
    for col, x in zip(heads[prefix], rest[2:]):
        if col == "nccl":
            rows[prefix + (rest[0], int(rest[1]), "nccl")]["-"] = float(x)
            continue
        codec, tg = col.rsplit("_t", 1)
        t, g = (tg.split("_g") + ["0"])[:2]
        rows[prefix + (rest[0], int(rest[1]), f"{codec}_t{t}")][int(g)] = float(x)
for key, by in sorted(rows.items()):
    if "-" in by:
        print(" ".join(map(str, key[:-1])), f"nccl {by['-']:.1f}")
        continue
    best = min((v, g) for g, v in by.items())
    cells = " ".join(f"g{g}:{v:.1f}" for g, v in sorted(by.items()))
    rule = by.get(0)
    print(" ".join(map(str, key)), cells, f"| best g{best[1]} {best[0]:.1f}" + (f" best/rule {best[0] / rule:.3f}" if rule else ""))
