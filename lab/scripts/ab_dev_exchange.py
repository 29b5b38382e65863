# A B summary of dev_exchange.py logs whose lines carry a variant prefix (the call scripts' `sed "s/^/$v /"`):
#   python3 lab/scripts/ab_dev_exchange.py LOG [PREFIX_FIELDS]   (PREFIX_FIELDS: words before dev_exchange's own,
#   default 1; call be's log has two: dtype and variant, the variant last)
# One line per (kind, size, column): each variant's runs and the ratio of the best runs to the first variant's.
# (The calls' inline summaries of 2026-11-28 be-bi zipped the header from its "bytes" word: every column was
# labelled with the name of the one before it. Their raw logs are right; this reads them.)
import collections, sys

log, nprefix = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
runs = collections.defaultdict(lambda: collections.defaultdict(list))
order, heads = [], {}
for line in open(log):
    f = line.split()
    if len(f) <= nprefix + 2:
        continue
    prefix, rest = tuple(f[:nprefix]), f[nprefix:]
    variant, group = prefix[-1], prefix[:-1]
    if rest[0] == "kind":
        heads[group] = rest[2:]  # after "kind bytes": nccl, then codec_threads columns
        continue
    if variant not in order:
        order.append(variant)
    for col, x in zip(heads[group], rest[2:]):
        runs[group + (rest[0], int(rest[1]), col)][variant].append(float(x))
for key, by in sorted(runs.items()):
    base = min(by[order[0]])
    cells = "  ".join(f"{v} " + "/".join(f"{x:.2f}" for x in by[v]) for v in order if by[v])
    ratios = " ".join(f"{v}/{order[0]} {min(by[v]) / base:.3f}" for v in order[1:] if by[v])
    print(" ".join(str(k) for k in key[:-3]), f"{key[-3]:4s} {key[-2]:>10d} {key[-1]:9s} {cells}   {ratios}")
