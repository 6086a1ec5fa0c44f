package autorate

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/topology"
)

// input is what one decision looks at.
type input struct {
	rate, min, max float64
	target         time.Duration
	w              topology.HealthWindow
	seen           bool    // a tick was observed (this instance leads the queue)
	waiting        int64   // users waiting after the last tick
	admittedPerSec float64 // users admitted per second since the last step
	sinceCut       time.Duration
	cutFrom        float64       // the rate the last cut came from (0: none)
	cutP95         time.Duration // the p95 that made the last cut
	atPlateau      time.Duration // how long the rate has been at the plateau (-1: not there)
}

// decide is the AIMD rule (pure: the tests' table runs it through Step).
func (c *Controller) decide(in input) Decision {
	p95 := in.w.Quantile(0.95)
	d := Decision{Kind: "hold", Rate: in.rate, P95: p95, Failures: in.w.Failures, Requests: in.w.Count, from: in.rate}
	ms := func(t time.Duration) string { return strconv.FormatInt(int64(math.Round(float64(t)/1e6)), 10) + " ms" }
	target := ms(in.target)
	failBreach := in.w.Failures >= c.cfg.MinFailures && in.w.FailureRatio() > c.cfg.FailureRatio
	slowBreach := in.w.Count >= c.cfg.MinRequests && p95 > in.target
	// Within CutHold of a cut the window still shows the rate before; but failing requests
	// with a p95 still rising say the backlog outgrows the pool's wait: the cut was not
	// enough (a backend whose capacity fell), and the next comes at once.
	worse := failBreach && p95 > in.cutP95
	coolingCut := in.sinceCut >= 0 && in.sinceCut < c.cfg.CutHold && !worse
	coolingRaise := in.sinceCut >= 0 && in.sinceCut < c.cfg.RaiseHold
	why := ""
	switch {
	case slowBreach:
		why = "p95 " + ms(p95) + " over the " + target + " target"
	case failBreach:
		why = fmt.Sprintf("%d failures in %d requests (%.1f %%)", in.w.Failures, in.w.Count, 100*in.w.FailureRatio())
	}
	switch {
	case (slowBreach || failBreach) && coolingCut:
		d.tag, d.Reason = "breach-cooling", "held: "+why+", waiting for the last cut to take effect"
	case (slowBreach || failBreach) && in.rate <= in.min:
		d.Rate = in.min
		d.tag, d.Reason = "min", "held at the minimum "+rateStr(in.min)+"/s: "+why
	case slowBreach || failBreach:
		d.Kind = "cut"
		f := c.cfg.Cut
		if slowBreach {
			f = math.Max(c.cfg.MaxCut, math.Min(c.cfg.Cut, float64(in.target)/float64(p95)))
		}
		d.Rate = math.Max(in.min, roundRate(in.rate*f))
		d.tag, d.Reason = "cut", "cut to "+rateStr(d.Rate)+"/s: "+why
	case in.w.Count == 0:
		d.tag, d.Reason = "none", "held: no backend requests"
	case in.w.Count < c.cfg.MinRequests:
		d.tag, d.Reason = "few", fmt.Sprintf("held: only %d backend requests", in.w.Count)
	case p95 > time.Duration(c.cfg.Headroom*float64(in.target)):
		d.tag, d.Reason = "near", "held: p95 "+ms(p95)+" near the "+target+" target"
	case coolingRaise:
		d.tag, d.Reason = "cooling", "held: p95 "+ms(p95)+" after a cut, waiting before raising"
	case in.rate >= in.max:
		d.Rate = in.max
		d.tag, d.Reason = "max", "held at the maximum "+rateStr(in.max)+"/s: p95 "+ms(p95)
	case !in.seen || in.waiting == 0:
		d.tag, d.Reason = "idle", "held: nobody waiting"
	case in.admittedPerSec < c.cfg.Used*in.rate-1:
		d.tag, d.Reason = "unused", "held: "+rateStr(in.admittedPerSec)+"/s admitted of "+rateStr(in.rate)+"/s (the rate is not used)"
	default:
		step, probing := RaiseStep(in.max), ""
		plateau := roundRate(c.cfg.Plateau * in.cutFrom)
		switch {
		case in.cutFrom > 0 && in.rate >= plateau && (in.atPlateau < 0 || in.atPlateau < c.cfg.PlateauFor):
			d.tag, d.Reason = "plateau", fmt.Sprintf("held: %s/s is %.0f %% under the %s/s the last overshoot was cut from; p95 %s",
				rateStr(in.rate), 100*(1-c.cfg.Plateau), rateStr(in.cutFrom), ms(p95))
			return d
		case in.cutFrom > 0 && in.rate >= plateau:
			step *= c.cfg.ProbeStep
			probing = " (probing past the plateau)"
		case in.cutFrom > 0 && in.rate+step > plateau:
			step = plateau - in.rate
			probing = " (the plateau: " + strconv.FormatFloat(100*(1-c.cfg.Plateau), 'f', 0, 64) + " % under the last overshoot)"
		}
		d.Kind = "raise"
		d.Rate = math.Min(in.max, roundRate(in.rate+step))
		d.tag, d.Reason = "raise", fmt.Sprintf("raised to %s/s%s: p95 %s, %d failures in %d requests", rateStr(d.Rate), probing, ms(p95), in.w.Failures, in.w.Count)
	}
	return d
}

// RaiseStep is the additive increase per control period for a queue whose auto_max is max:
// max(1, max/100) users/s, so a controller climbs from 0 to auto_max in at most 100 periods.
func RaiseStep(max float64) float64 { return math.Max(1, max/100) }

// roundRate keeps a rate to two decimals (the settings' readable form).
func roundRate(r float64) float64 { return math.Round(r*100) / 100 }

func rateStr(r float64) string { return strconv.FormatFloat(roundRate(r), 'f', -1, 64) }
