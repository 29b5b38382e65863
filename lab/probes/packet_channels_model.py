"""A model of the packet path's buffers with the fused all-reduce's second channel
(lab/wip/fused-rs-ag.patch), run over random interleavings of the ranks' steps.

Each rank runs the same random sequence of calls: 'X' (an exchange on channel 1, e.g. a reduce-scatter)
or 'F' (the fused all-reduce: channel 1, then each summed vector pushed on through channel 2). Per
channel and rank: an epoch, 3 buffers of [src][vector], and the vectors of its last call. A call at
epoch e writes its vectors into buffer e % 3 of every peer, empties its own buffer (e - 1) % 3 up to the
previous call's vectors, and waits for every peer's vectors in buffer e % 3 (the kernel's order). The
model fails if a wait ever reads a vector another call wrote, or if the ranks deadlock.

    python3 lab/probes/packet_channels_model.py [runs]
"""
import random
import sys

EMPTY = None


def rank_program(me, W, calls, mem, state):
    """One rank's steps (a generator: each yield is a point where another rank may run)."""
    for k, (kind, nv) in enumerate(calls):
        chans = [1, 2] if kind == "F" else [1]
        epoch = {c: state[me][c]["epoch"] + 1 for c in chans}
        # push on channel 1
        for p in range(nv):
            for d in range(W):
                if d != me:
                    mem[d][1][epoch[1] % 3][me][p] = (k, 1)
                    yield
        # empty the previous buffers
        for c in chans:
            prev = (epoch[c] - 1) % 3
            for p in range(state[me][c]["prev"]):
                for s in range(W):
                    if s != me:
                        mem[me][c][prev][s][p] = EMPTY
                        yield
        # receive channel 1 (and, fused, push each sum on through channel 2)
        for p in range(nv):
            for s in range(W):
                if s == me:
                    continue
                while mem[me][1][epoch[1] % 3][s][p] is EMPTY:
                    yield "wait"
                if mem[me][1][epoch[1] % 3][s][p] != (k, 1):
                    raise AssertionError(f"rank {me} call {k}: channel 1 read {mem[me][1][epoch[1] % 3][s][p]}")
            if kind == "F":
                for d in range(W):
                    if d != me:
                        mem[d][2][epoch[2] % 3][me][p] = (k, 2)
                        yield
        if kind == "F":
            for p in range(nv):
                for s in range(W):
                    if s == me:
                        continue
                    while mem[me][2][epoch[2] % 3][s][p] is EMPTY:
                        yield "wait"
                    if mem[me][2][epoch[2] % 3][s][p] != (k, 2):
                        raise AssertionError(f"rank {me} call {k}: channel 2 read {mem[me][2][epoch[2] % 3][s][p]}")
        for c in chans:
            state[me][c] = {"epoch": epoch[c], "prev": nv}


def run(seed, W=3, n_calls=12, max_vectors=3):
    rng = random.Random(seed)
    calls = [(rng.choice("XF"), rng.randint(1, max_vectors)) for _ in range(n_calls)]
    mem = [{c: [[[EMPTY] * max_vectors for _ in range(W)] for _ in range(3)] for c in (1, 2)} for _ in range(W)]
    state = [{c: {"epoch": 0, "prev": 0} for c in (1, 2)} for _ in range(W)]
    progs = {r: rank_program(r, W, calls, mem, state) for r in range(W)}
    stalled = 0
    while progs:
        r = rng.choice(list(progs))
        try:
            step = next(progs[r])
        except StopIteration:
            del progs[r]
            stalled = 0
            continue
        stalled = stalled + 1 if step == "wait" else 0
        if stalled > 10000:
            raise AssertionError(f"deadlock (seed {seed}, calls {calls})")


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for seed in range(runs):
        run(seed, W=2 + seed % 3)
    print(f"{runs} random interleavings, W = 2..4, 12 calls each (X and F mixed): no stale read, no deadlock")
