"""The numbers docs/benchmarks.md's family prose quotes, from one family CSV (`quickreduce bench --collective`):
python3 lab/scripts/family_facts.py results/h200-x4/family-bf16.csv"""
import collections, csv, sys

rows = list(csv.DictReader(open(sys.argv[1])))
t = collections.defaultdict(dict)
for r in rows:
    t[(r["collective"], int(r["size_bytes"]))][r["method"]] = float(r["time_us"])
MB = 1 << 20
codecs = sorted({m for d in t.values() for m in d if m.startswith("qr_") and m not in ("qr_passthrough", "qr_lossless", "qr_auto_int4")})
worst = [(d["nccl"] / max(d[c] for c in codecs if c in d), c, s) for (c, s), d in t.items()]
print("slowest codec x NCCL: %.2f-%.2f" % (min(w[0] for w in worst), max(w[0] for w in worst)), "lowest at", min(worst)[1:])
for coll in ("reduce_scatter", "all_gather", "all_to_all"):
    sizes = sorted(s for c, s in t if c == coll)
    def best_peer(s):
        d = t[(coll, s)]
        return min((v, m) for m, v in d.items() if not m.startswith("qr_"))
    ex = lambda s: min(t[(coll, s)]["qr_passthrough"], t[(coll, s)]["qr_lossless"])
    small = [s for s in sizes if s <= 512 << 10]
    print(f"{coll}: exact 8-512K {min(ex(s) for s in small):.2f}-{max(ex(s) for s in small):.2f} us,"
          f" x best peer {min(best_peer(s)[0] / ex(s) for s in small):.2f}-{max(best_peer(s)[0] / ex(s) for s in small):.2f}")
    for s in sizes:
        if s >= 2 * MB:
            bp = best_peer(s)
            print(f"  {s // MB:4d}M exact {ex(s):8.1f} best peer {bp[1]} {bp[0]:8.1f} ratio {bp[0] / ex(s):.2f};"
                  + " ".join(f" {c[3:]} x nccl {t[(coll, s)]['nccl'] / t[(coll, s)][c]:.2f}" for c in ("qr_fp8", "qr_int4", "qr_int4h")))
