package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// hostileLatencyGoal is the most a read may slow down with a full memtable.
const hostileLatencyGoal = 2.0

func hostileReport(res *Result, sz hostileSizes, knobs hostileKnobs, cases []hostileCase, levels []hostileLevel) {
	budget := knobs.budgetSum()
	res.params("knobs", knobs.describe(),
		"budget_sum", fmt.Sprintf("%.0f MiB (%s)", mib(budget), strings.Join(hostileBudgetKnobs, " + ")))
	res.Values["budget_sum_mib"] = mib(budget)

	mt := Table{Title: "Memory: peak RSS (VmHWM) of a fresh worker child per case, against its budget sum",
		Header: []string{"case", "request", "worker's answer", "RSS before (MiB)", "peak RSS (MiB)", "growth (MiB)", "peak / budget sum", "time"}}
	for _, c := range cases {
		ans := answers(c.Answers)
		if c.Note != "" {
			ans = strings.TrimPrefix(ans+"; "+c.Note, "; ")
		}
		r := float64(c.Peak) / float64(max(budget, 1))
		peak, ratio := fmt.Sprintf("%.0f", mib(c.Peak)), fmt.Sprintf("%.2f", r)
		measured := fmt.Sprintf("%.2f (%.0f of %.0f MiB)", r, mib(c.Peak), mib(budget))
		switch {
		case c.Skipped:
			peak, ratio = "—", "—"
			measured = "not measured (worker killed earlier)"
		case c.Killed:
			peak = fmt.Sprintf("killed at > %s (%.0f)", fmtBytes(sz.rssGuard), mib(c.Peak))
			ratio = "> " + ratio
			measured = fmt.Sprintf("> %.2f (killed at > %s)", r, fmtBytes(sz.rssGuard))
		}
		mt.Rows = append(mt.Rows, []string{c.Name, c.Request, ans, fmt.Sprintf("%.0f", mib(c.Before)), peak,
			fmt.Sprintf("%.0f", mib(c.growth())), ratio, fmtDur(c.Elapsed)})
		res.values(c.Key+"_%s", map[string]float64{"peak_mib": mib(c.Peak), "growth_mib": mib(c.growth()), "ratio": r,
			"killed": b2f(c.Killed), "skipped": b2f(c.Skipped), "ok": float64(c.OK), "refused": float64(c.Refused),
			"no_answer": float64(c.Gone), "seconds": c.Elapsed.Seconds()})
		res.values(c.Key+"_%s", c.Counts)
		res.target(c.Name+": peak RSS / budget sum", "≤ 1.00", measured, !c.Killed && !c.Skipped && r <= 1)
	}
	res.Tables = append(res.Tables, mt)

	lt := Table{Title: fmt.Sprintf("Latency: Get of a sealed row and a List page of %d sealed rows, against the rows appended since the last seal (flush interval 0; the worker may seal a large memtable itself: see \"unsealed when read\"), a store per size, one client", hostilePageRows),
		Header: []string{"rows appended", "unsealed when read", "filled in", "appends' answers", "pending gens", "worker RSS (MiB)", "Get p50", "Get p99", "ratio p50 / p99", "List p50", "List p99", "ratio p50 / p99", "failed reads"}}
	var base hostileLevel
	for i, lv := range levels {
		if i == 0 {
			base = lv
		}
		gr50, gr99 := durRatio(lv.Get.P50, base.Get.P50), durRatio(lv.Get.P99, base.Get.P99)
		lr50, lr99 := durRatio(lv.List.P50, base.List.P50), durRatio(lv.List.P99, base.List.P99)
		appends, fill := answers(lv.Appends), fmtDur(lv.Fill)
		if len(lv.Appends) == 0 {
			appends, fill = "—", "—"
		}
		failed := answers(lv.Failed)
		if failed == "" {
			failed = "0"
		}
		lt.Rows = append(lt.Rows, []string{fmt.Sprint(lv.Rows), fmt.Sprint(lv.Unsealed), fill, appends, fmt.Sprint(lv.Pending), fmt.Sprintf("%.0f", mib(lv.RSS)),
			fmt.Sprintf("%s (n=%d)", fmtDur(lv.Get.P50), lv.Get.N), fmtDur(lv.Get.P99), fmt.Sprintf("%.2f / %.2f", gr50, gr99),
			fmt.Sprintf("%s (n=%d)", fmtDur(lv.List.P50), lv.List.N), fmtDur(lv.List.P99), fmt.Sprintf("%.2f / %.2f", lr50, lr99), failed})
		res.values("%s_"+strconv.Itoa(lv.Rows), map[string]float64{"get_p50_us": us(lv.Get.P50), "get_p99_us": us(lv.Get.P99), "list_p50_us": us(lv.List.P50),
			"list_p99_us": us(lv.List.P99), "get_n": float64(lv.Get.N), "list_n": float64(lv.List.N), "get_p50_ratio": gr50,
			"get_p99_ratio": gr99, "list_p50_ratio": lr50, "list_p99_ratio": lr99, "pending": float64(lv.Pending),
			"unsealed": float64(lv.Unsealed), "rss_mib": mib(lv.RSS), "failed_reads": float64(len(lv.Failed))})
	}
	res.Tables = append(res.Tables, lt)
	if n := len(levels); n > 1 {
		top := levels[n-1]
		for _, t := range []struct {
			name     string
			got, was time.Duration
		}{
			{"Get p50", top.Get.P50, base.Get.P50}, {"Get p99", top.Get.P99, base.Get.P99},
			{"List page p50", top.List.P50, base.List.P50}, {"List page p99", top.List.P99, base.List.P99},
		} {
			r := durRatio(t.got, t.was)
			res.target(fmt.Sprintf("%s with %d rows appended unsealed / empty memtable", t.name, top.Rows), fmt.Sprintf("≤ %.0f", hostileLatencyGoal),
				fmt.Sprintf("%.2f (%s vs %s)", r, fmtDur(t.got), fmtDur(t.was)), r <= hostileLatencyGoal)
		}
	}
	res.note("Each memory case starts a fresh worker; a worker whose RSS passes %s is killed and the case recorded as killed (the machine's memory is shared).", fmtBytes(sz.rssGuard))
	res.note("An answer is what the worker said: a refusal (e.g. 413 append_too_large) and an acceptance (200) are both outcomes; \"no answer\" is a transport error (a killed worker, a timeout).")
}

// durRatio is a/b, 0 when b is 0.
func durRatio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
