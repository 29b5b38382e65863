// The dynamic all-to-all's plan (Communicator::all_to_all_dynamic): the split sizes are rows in a
// device tensor, known only in the kernel. Each CTA of every rank reads its own rank's counts,
// checks them, sends them in its size row (exchange.cuh, phase 2) beside its output capacity, and
// computes from the W rows it then holds the same plan as every other CTA of every rank:
//   - a rank whose counts are bad (a negative count, or counts adding up to more rows than its
//     input has) sends nothing in that call: its counts count as zeros everywhere;
//   - rank d receives its sources' rows in rank order up to its capacity: the first source whose
//     rows do not all fit sends the rows that do, later sources send none to d.
// So no rank ever writes past an output's capacity, reads past an input's rows, or pushes more into
// a peer's workspace than that peer's output holds, and every rank finishes the call (nothing
// waits for data that is never sent). The bad counts are reported through the error record
// (exchange.cuh: report_count_error). The same functions run in the kernel and in the CPU twin's
// binding (the tests check the plan there).
#pragma once
#include <cstdint>

#include "core/macros.hpp"

namespace qr {

// What a rank found wrong in its own counts (the first of them, in index order).
enum class CountProblem : uint32_t { kNone = 0, kNegative = 1, kSumAboveRows = 2 };

struct SendCountCheck {
  CountProblem problem;
  int index;      // kNegative: the destination whose count is negative
  int64_t value;  // kNegative: that count; kSumAboveRows: the sum (saturated at INT64_MAX)
};

// Checks counts[0..W) (rows this rank sends each rank) against the input's in_rows and writes the
// rows it sends: the counts when they are valid, else zeros.
QR_HD SendCountCheck check_send_counts(const int64_t* counts, int W, uint64_t in_rows, uint32_t* rows) {
  SendCountCheck c{CountProblem::kNone, -1, 0};
  int64_t sum = 0;
  for (int d = 0; d < W; ++d) {
    const int64_t v = counts[d];
    if (v < 0 && c.problem == CountProblem::kNone) c = {CountProblem::kNegative, d, v};
    if (v > 0) sum = v > INT64_MAX - sum ? INT64_MAX : sum + v;
  }
  if (c.problem == CountProblem::kNone && uint64_t(sum) > in_rows) c = {CountProblem::kSumAboveRows, -1, sum};
  for (int d = 0; d < W; ++d) rows[d] = c.problem == CountProblem::kNone ? uint32_t(counts[d]) : 0u;
  return c;
}

// A rank's size row carries, beside its counts, its output capacity (rows) and whether its own
// counts were bad (then its counts are zeros).
QR_HD uint64_t dynamic_info(uint32_t capacity_rows, bool bad) { return uint64_t(bad ? 1u : 0u) << 32 | capacity_rows; }
QR_HD uint32_t info_capacity(uint64_t info) { return uint32_t(info); }
QR_HD bool info_bad(uint64_t info) { return (info >> 32) != 0; }

// Rank d's column of the plan: rows[s * stride + d] (rows rank s announced for d; zeros from a bad
// rank) cut to d's capacity, its sources kept in rank order, into moved[s * stride + d]. Returns the
// first source cut short (W when none) and writes the rows announced to d in total. Columns are
// independent: the kernel computes one a thread.
QR_HD int fit_column(const uint32_t* rows, uint32_t capacity, int W, int stride, int d, uint32_t* moved,
                     uint64_t* announced) {
  int cut = W;
  uint64_t used = 0, total = 0;
  for (int s = 0; s < W; ++s) {
    const uint32_t want = rows[s * stride + d];
    const uint64_t room = capacity - used;  // used <= capacity
    const uint32_t take = want <= room ? want : uint32_t(room);
    if (take < want && cut == W) cut = s;
    moved[s * stride + d] = take;
    used += take;
    total += want;
  }
  *announced = total;
  return cut;
}

// The whole plan (capacity[d]: rows rank d's output holds): every column; returns rank `me`'s cut and
// writes the rows announced to it in total.
QR_HD int fit_to_capacity(const uint32_t* rows, const uint32_t* capacity, int W, int stride, int me,
                          uint32_t* moved, uint64_t* announced_to_me) {
  int cut = W;
  for (int d = 0; d < W; ++d) {
    uint64_t announced = 0;
    const int c = fit_column(rows, capacity[d], W, stride, d, moved, &announced);
    if (d == me) cut = c, *announced_to_me = announced;
  }
  return cut;
}

}  // namespace qr
