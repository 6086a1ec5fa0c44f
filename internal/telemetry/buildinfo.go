package telemetry

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Build is what the binary knows about how it was built.
type Build struct {
	Version   string // the main module's version: a tag for go install …@v1.2.3, else "(devel)"
	Revision  string // the VCS revision, "-dirty" appended for a modified work tree; "unknown" without VCS information
	GoVersion string // the Go release that built it
}

// ReadBuild reads the binary's build information (runtime/debug.ReadBuildInfo); stamped,
// when not empty, is the version stamped at link time (the server's main.version), which
// wins over the module's.
func ReadBuild(stamped string) Build {
	b := Build{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && b.Revision != "unknown" {
			b.Revision += "-dirty"
		}
	}
	if stamped != "" {
		b.Version = stamped
	}
	return b
}

// RegisterBuildInfo registers waitroom_build_info{version,revision,go_version}, always 1:
// the usual way to tell on a dashboard which build each instance runs, and to join it onto
// other series (… * on(instance) group_left(version) waitroom_build_info).
func RegisterBuildInfo(reg prometheus.Registerer, b Build) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "waitroom_build_info",
		Help:        "The build this instance runs: always 1, its labels say which.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "go_version": b.GoVersion},
	})
	g.Set(1)
	reg.MustRegister(g)
}
