"""The oracle of the dynamic all-to-all (Communicator.all_to_all_dynamic, docs/moe.md).

The split sizes are rows, known only on the device. Every rank's kernel computes the same plan
(csrc/collectives/exchange/dynamic_plan.hpp):

- a rank whose counts are bad (a negative count, or counts adding up to more rows than its input
  has) sends nothing: its counts count as zeros everywhere, and it reports the first problem;
- rank d receives its sources' rows in rank order up to its output's capacity: the first source
  whose rows do not all fit sends the rows that do, later sources send none to d.

The rows that move are segments of the host-sized all-to-all (oracle/exchange.py): each is encoded
on its own from its first value, so for counts that fit the output equals ``all_to_all`` with
``splits = counts * row`` bit for bit, every codec.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .exchange import all_to_all

NONE, NEGATIVE, SUM_ABOVE_ROWS = 0, 1, 2
INT64_MAX = (1 << 63) - 1


def check_send_counts(counts: Sequence[int], in_rows: int) -> tuple[tuple[int, int, int], list[int]]:
    """((problem, index, value), rows sent): the first negative count (its index and value), else a sum
    above in_rows (index -1, the sum saturated at INT64_MAX); rows are the counts, or zeros when bad."""
    problem = (NONE, -1, 0)
    total = 0
    for d, v in enumerate(counts):
        v = int(v)
        if v < 0 and problem[0] == NONE:
            problem = (NEGATIVE, d, v)
        if v > 0:
            total = min(total + v, INT64_MAX)
    if problem[0] == NONE and total > in_rows:
        problem = (SUM_ABOVE_ROWS, -1, total)
    rows = [int(v) for v in counts] if problem[0] == NONE else [0] * len(counts)
    return problem, rows


def plan(counts: Sequence[Sequence[int]], in_rows: Sequence[int], capacity: Sequence[int]) -> dict:
    """Every rank's plan from every rank's counts (counts[r][d]: rows rank r asks to send rank d), input
    rows and output capacity. Keys: rows, moved, problems, cut[d] (first source cut short at d, W when
    none), announced[d] (rows sent to d in total), send_at[r][d] (rank r's first input row for d),
    recv_at[d][s] (rank d's first output row from s), recv_counts[d][s] (= moved[s][d])."""
    W = len(counts)
    problems, rows = [], []
    for r in range(W):
        p, sent = check_send_counts(counts[r], int(in_rows[r]))
        problems.append(p)
        rows.append(sent)
    moved = [[0] * W for _ in range(W)]
    cut, announced = [W] * W, [0] * W
    for d in range(W):
        used = 0
        for s in range(W):
            take = min(rows[s][d], int(capacity[d]) - used)
            if take < rows[s][d] and cut[d] == W:
                cut[d] = s
            moved[s][d] = take
            used += take
            announced[d] += rows[s][d]
    send_at = [[sum(rows[r][:d]) for d in range(W)] for r in range(W)]
    recv_at = [[sum(moved[s2][d] for s2 in range(s)) for s in range(W)] for d in range(W)]
    recv_counts = [[moved[s][d] for s in range(W)] for d in range(W)]
    return {"rows": rows, "moved": moved, "problems": problems, "cut": cut, "announced": announced,
            "send_at": send_at, "recv_at": recv_at, "recv_counts": recv_counts}


def moved_inputs(inputs: Sequence[np.ndarray], p: dict, row: int) -> list[np.ndarray]:
    """Each rank's input cut down to the rows that move, in destination order (its segments)."""
    W = len(inputs)
    out = []
    for r in range(W):
        x = np.asarray(inputs[r]).reshape(-1)
        parts = [x[(p["send_at"][r][d]) * row:(p["send_at"][r][d] + p["moved"][r][d]) * row] for d in range(W)]
        out.append(np.concatenate(parts) if parts else x[:0])
    return out


def all_to_all_dynamic(inputs: Sequence[np.ndarray], dtype: str, codec: str, counts: Sequence[Sequence[int]],
                       row: int, capacity: Sequence[int]) -> tuple[list[np.ndarray], dict]:
    """(every rank's output rows that are written, as raw T bits: sum(moved[:, d]) rows of `row`
    values; the plan). inputs: 1-D raw bits, rank r's holding its rows (len / row of them)."""
    W = len(inputs)
    in_rows = [np.asarray(x).size // row for x in inputs]
    p = plan(counts, in_rows, capacity)
    splits = [[p["moved"][r][d] * row for d in range(W)] for r in range(W)]
    return all_to_all(moved_inputs(inputs, p, row), dtype, codec, splits), p
