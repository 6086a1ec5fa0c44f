package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
)

// TestJourneyDemoCrowd (the zero-config demo): a newcomer opens the index, which says what
// each demo line is, follows the crowd line's link and lands behind a simulated crowd: a
// place well past 1 with an ETA, counting down, and a note that the crowd is simulated with a
// link to the empty line. The turn comes; the link leads to the empty line, where the
// newcomer goes straight in and is offered the crowd line back. Min reads the index in
// Korean on a phone. axe runs at every state (the crowd line's waiting page in light and
// dark at both widths).
func TestJourneyDemoCrowd(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "journey-demo", 90*time.Second, map[string]string{"WR_DEMO": "true", "WR_DEMO_CROWD": "20"})
	// A slow line while the newcomer looks at it: the place stays well past 1 for the states.
	mustAdmin(t, in, "PUT", "/admin/api/queues/demo-crowd", map[string]any{"rate_per_second": 0.5})
	testwait.For(t, time.Minute, "the crowd of 20 in line", func() bool {
		var st struct {
			Queues []struct {
				Name    string `json:"name"`
				Waiting int64  `json:"waiting"`
			} `json:"queues"`
		}
		call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
		for _, q := range st.Queues {
			if q.Name == "demo-crowd" {
				return q.Waiting >= 18
			}
		}
		return false
	})

	j := newJourney(t, ctx)
	ana := j.person("ana", journeyDesktop)
	minji := j.person("min", journeyPhone)

	// 1. The index: both demo lines, each with its sentence and a link.
	ana.navigate(in.url + "/?lang=en")
	minji.navigate(in.url + "/?lang=ko")
	for _, p := range []*journeyPerson{ana, minji} {
		p.waitJS("both demo lines on the index", 10*time.Second, `['demo', 'demo-crowd'].every((n) => {
			const li = document.querySelector('li[data-queue="' + n + '"]');
			return li && li.querySelector('[data-testid="queue-demo-note"]').textContent.trim() !== '' &&
				li.querySelector('a[data-testid="queue-link"]').getAttribute('href') === '/q/' + n;
		})`)
	}
	if got := ana.eval(`document.querySelector('li[data-queue="demo-crowd"] [data-testid="queue-demo-note"]').textContent`); got != "Demo: a line with a simulated crowd ahead of you — watch your place count down." {
		t.Errorf("the crowd line's sentence on the index: %q", got)
	}
	j.state(ana, "index")
	j.state(minji, "index-ko")

	// 2. Ana follows the crowd line's link: a place behind the crowd, an ETA, the note.
	ana.activate(`li[data-queue="demo-crowd"] a[data-testid="queue-link"]`)
	ana.waitJS("waiting behind the crowd", 15*time.Second, `location.pathname === '/q/demo-crowd' &&
		!document.getElementById('waiting').hidden && Number(document.getElementById('position').dataset.position) > 1 &&
		document.getElementById('eta').textContent !== '–' &&
		document.getElementById('demo-note').dataset.demo === 'crowd' &&
		document.getElementById('demo-switch').getAttribute('href') === '/q/demo'`)
	first := ana.position()
	j.stateMatrix(ana, "crowd-waiting")

	// 3. The place counts down.
	ana.waitJS("the place counting down", 30*time.Second, fmt.Sprintf(`Number(document.getElementById('position').dataset.position) < %d`, first.Pos))
	t.Logf("the crowd line: place %d, ETA %s, then %d", first.Pos, first.ETA, ana.position().Pos)

	// 4. The line speeds up; the turn comes.
	mustAdmin(t, in, "PUT", "/admin/api/queues/demo-crowd", map[string]any{"rate_per_second": 20})
	ana.waitJS("the turn", 30*time.Second, `!document.getElementById('admitted').hidden`)
	j.state(ana, "crowd-admitted")

	// 5. The switch link: the empty line lets her straight in and offers the crowd line back.
	ana.click("demo-switch")
	ana.waitJS("straight in on the empty line", 15*time.Second, `location.pathname === '/q/demo' &&
		!document.getElementById('admitted').hidden && document.getElementById('demo-note').dataset.demo === 'empty' &&
		document.getElementById('demo-switch').getAttribute('href') === '/q/demo-crowd'`)
	j.state(ana, "empty-admitted")
}
