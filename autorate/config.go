// Package autorate is the auto rate controller: for each queue in rate_mode "auto" that
// this instance leads, it moves the queue's rate by AIMD on the health of the backend the
// guards protect. It is a consumer of package queue (the tick results, the settings, the
// health windows) and writes the rate into the queue's settings inside its own Redis
// transaction; queue does not import it.
package autorate

import (
	"time"

	"github.com/rs/zerolog"
)

// Config tunes the Controller. Zero fields take the documented defaults, chosen for a
// backend whose answers come within a second and whose admitted users order within a
// second or two of admission.
type Config struct {
	// Period is the control period: one decision per auto queue per Period (1 s).
	Period time.Duration
	// Window is how far back the backend's health windows are merged (2 s: each instance
	// writes one window per second, so two of them per instance).
	Window time.Duration
	// Cut is the multiplicative decrease on a breach (0.75: a quarter off). A p95 far over
	// the target cuts deeper, by target/p95, down to MaxCut (0.5: half off): a backend whose
	// capacity halved is left in seconds.
	Cut    float64
	MaxCut float64
	// CutHold is the time after a cut without another cut (5 s): the window still holds
	// requests of the rate before, and the backlog the rate before left in the backend
	// drains for a few seconds (cutting again meanwhile would overshoot downwards).
	CutHold time.Duration
	// RaiseHold is the time after a cut without an increase (5 s): the users admitted at
	// the new rate reach the backend a little later.
	RaiseHold time.Duration
	// Headroom: increases only while the p95 is at most Headroom × the target (0.8); between
	// that and the target the rate holds, so the controller settles just under the knee
	// instead of running into it every few seconds.
	Headroom float64
	// Plateau: increases stop at Plateau (0.8) × the rate the last overshoot was cut from
	// — a backend's latency is flat below its knee and climbs fast past it, and the window's
	// lag lets the rate climb a step or three past the knee before the cut, so the knee
	// lies a little under the rate cut from. After PlateauFor (10 s) healthy there, the rate
	// probes upwards again in ProbeStep (a quarter) steps, in case the backend grew.
	Plateau    float64
	PlateauFor time.Duration
	ProbeStep  float64
	// MinRequests is the fewest requests in the window for a latency decision (5); with
	// fewer the rate holds.
	MinRequests int64
	// MinFailures and FailureRatio: a breach by failures needs at least MinFailures (3)
	// failed requests and more than FailureRatio (1 %) of the window failing.
	MinFailures  int64
	FailureRatio float64
	// Used is how much of the rate must really be admitted for an increase (0.8, minus one
	// user): a rate that max_active or a short line keeps from being used is not raised.
	Used float64
	Log  zerolog.Logger
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Period, time.Second)
	def(&c.Window, 2*time.Second)
	def(&c.CutHold, 5*time.Second)
	def(&c.RaiseHold, 5*time.Second)
	deff := func(f *float64, v float64) {
		if *f <= 0 {
			*f = v
		}
	}
	deff(&c.Cut, 0.75)
	deff(&c.MaxCut, 0.5)
	deff(&c.Plateau, 0.8)
	deff(&c.ProbeStep, 0.25)
	def(&c.PlateauFor, 10*time.Second)
	deff(&c.Headroom, 0.8)
	deff(&c.FailureRatio, 0.01)
	deff(&c.Used, 0.8)
	if c.MinRequests <= 0 {
		c.MinRequests = 5
	}
	if c.MinFailures <= 0 {
		c.MinFailures = 3
	}
	return c
}
