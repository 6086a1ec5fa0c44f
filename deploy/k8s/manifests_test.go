package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// configFile is the server's settings table, read as text (no import of the root module).
const configFile = "../../server/config.go"

// The kinds a manifest here may have: these API groups at these versions. Anything else
// (a misspelled kind, a removed version such as autoscaling/v2beta2, a CRD) fails.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(appsv1.AddToScheme(s))
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(autoscalingv2.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	return s
}()

// decoder is apimachinery's strict deserializer (what kubectl's --validate=strict asks the
// API server for): an unknown field, a field in the wrong case or a duplicate key is an
// error, not silently dropped.
var decoder = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

var kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.config.k8s.io", Version: "v1beta1", Kind: "Kustomization"}

// kustomization is the part of kustomize's Kustomization used here; any other field fails
// the strict decoding (kustomize's own types would pull in kustomize).
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
}

// kustomizationFields are kustomization's JSON names, exactly.
var kustomizationFields = []string{"apiVersion", "kind", "namespace", "resources"}

// object is one decoded document: a typed Kubernetes object or a *kustomization.
type object struct {
	file string
	doc  int
	obj  any
}

// splitDocuments returns the YAML documents of data, without the empty ones (only
// comments or whitespace).
func splitDocuments(data []byte) ([][]byte, error) {
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		docs = append(docs, d)
	}
}

// decode reads apiVersion and kind, then decodes the document strictly into the matching
// typed object.
func decode(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, fmt.Errorf("no apiVersion or kind (%q, %q)", tm.APIVersion, tm.Kind)
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if gvk == kustomizationGVK {
		// sigs.k8s.io/yaml matches field names case-insensitively (encoding/json): check
		// the keys exactly first, then decode strictly (unknown and duplicate fields).
		var keys map[string]any
		if err := yaml.UnmarshalStrict(data, &keys); err != nil {
			return nil, fmt.Errorf("Kustomization: %w", err)
		}
		for key := range keys {
			if !slices.Contains(kustomizationFields, key) {
				return nil, fmt.Errorf("Kustomization: unknown field %q", key)
			}
		}
		var k kustomization
		if err := yaml.UnmarshalStrict(data, &k); err != nil {
			return nil, fmt.Errorf("Kustomization: %w", err)
		}
		return &k, nil
	}
	if !scheme.Recognizes(gvk) {
		return nil, fmt.Errorf("unknown kind %s %s (not one of the API types this test knows)", tm.APIVersion, tm.Kind)
	}
	obj, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

// loadDir decodes every document of every *.yaml file in dir.
func loadDir(dir string) ([]object, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no *.yaml in %s", dir)
	}
	var objs []object
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		docs, err := splitDocuments(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(docs) == 0 {
			return nil, nil, fmt.Errorf("%s: no document", f)
		}
		for i, d := range docs {
			obj, err := decode(d)
			if err != nil {
				return nil, nil, fmt.Errorf("%s, document %d: %w", filepath.Base(f), i+1, err)
			}
			objs = append(objs, object{file: filepath.Base(f), doc: i + 1, obj: obj})
		}
	}
	return objs, names, nil
}

// setting is one environment variable of the server's settings table.
type setting struct{ name, def string }

// settingRE matches the start of an entry of server/config.go's settings table:
// {"WR_ADDR", ":8080", "listen address …", …
var settingRE = regexp.MustCompile(`(?m)^\s*\{"([A-Z][A-Z0-9_]*)", "((?:[^"\\]|\\.)*)", "`)

// serverSettings parses the names and defaults of every setting the server reads.
func serverSettings() (map[string]setting, error) {
	src, err := os.ReadFile(configFile)
	if err != nil {
		return nil, err
	}
	out := map[string]setting{}
	for _, m := range settingRE.FindAllStringSubmatch(string(src), -1) {
		def, err := strconv.Unquote(`"` + m[2] + `"`)
		if err != nil {
			return nil, fmt.Errorf("default of %s: %w", m[1], err)
		}
		out[m[1]] = setting{name: m[1], def: def}
	}
	// The table's shape changing (and this parser finding nothing) must not pass quietly.
	for _, must := range []string{"WR_ADDR", "REDIS_URL", "DATABASE_URL", "WR_SECRET", "WR_ADMIN_TOKEN",
		"WR_SHUTDOWN_TIMEOUT", "WR_MAX_STREAMS", "WR_MAX_CONNS", "WR_HEARTBEAT"} {
		if _, ok := out[must]; !ok {
			return nil, fmt.Errorf("%s: setting %s not found (%d found): has the settings table changed shape?", configFile, must, len(out))
		}
	}
	return out, nil
}

// manifests is the decoded set, by kind.
type manifests struct {
	files   []string
	deploy  *appsv1.Deployment
	svc     *corev1.Service
	pdb     *policyv1.PodDisruptionBudget
	hpa     *autoscalingv2.HorizontalPodAutoscaler
	ings    []*networkingv1.Ingress // one host, split by the annotations its paths need
	secrets []*corev1.Secret
	kust    *kustomization
}

func collect(objs []object, files []string) (*manifests, []string) {
	m := &manifests{files: files}
	var problems []string
	once := func(kind string, set bool) {
		if set {
			problems = append(problems, "more than one "+kind)
		}
	}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			once("Deployment", m.deploy != nil)
			m.deploy = v
		case *corev1.Service:
			once("Service", m.svc != nil)
			m.svc = v
		case *policyv1.PodDisruptionBudget:
			once("PodDisruptionBudget", m.pdb != nil)
			m.pdb = v
		case *autoscalingv2.HorizontalPodAutoscaler:
			once("HorizontalPodAutoscaler", m.hpa != nil)
			m.hpa = v
		case *networkingv1.Ingress:
			m.ings = append(m.ings, v)
		case *corev1.Secret:
			m.secrets = append(m.secrets, v)
		case *kustomization:
			once("Kustomization", m.kust != nil)
			m.kust = v
		default:
			problems = append(problems, fmt.Sprintf("%s document %d: %T is not expected here", o.file, o.doc, o.obj))
		}
	}
	return m, problems
}

// check returns every way the manifests disagree with each other or with the server.
func check(m *manifests, settings map[string]setting) []string {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	for kind, missing := range map[string]bool{"Deployment": m.deploy == nil, "Service": m.svc == nil,
		"PodDisruptionBudget": m.pdb == nil, "HorizontalPodAutoscaler": m.hpa == nil, "Ingress": len(m.ings) == 0} {
		if missing {
			bad("no %s", kind)
		}
	}
	if len(p) > 0 {
		return p
	}
	d := m.deploy
	pod := &d.Spec.Template.Spec
	podLabels := labels.Set(d.Spec.Template.Labels)

	// Selectors: the Deployment's, the Service's and the PDB's all select the pods.
	selects := func(what string, sel *metav1.LabelSelector) {
		if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
			bad("%s: empty selector", what)
			return
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			bad("%s: selector: %v", what, err)
			return
		}
		if !s.Matches(podLabels) {
			bad("%s: selector %s does not match the pod labels %v", what, s, podLabels)
		}
	}
	selects("Deployment", d.Spec.Selector)
	if len(m.svc.Spec.Selector) == 0 {
		bad("Service: empty selector")
	} else if !labels.SelectorFromSet(m.svc.Spec.Selector).Matches(podLabels) {
		bad("Service: selector %v does not match the pod labels %v", m.svc.Spec.Selector, podLabels)
	}
	selects("PodDisruptionBudget", m.pdb.Spec.Selector)

	if len(pod.Containers) != 1 {
		bad("Deployment: want one container, have %d", len(pod.Containers))
		return p
	}
	c := &pod.Containers[0]

	// Environment: only settings the server knows, each once; literal values of the right
	// type; the shared secrets from a Secret.
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			bad("env %s: set twice", e.Name)
		}
		env[e.Name] = e
		s, ok := settings[e.Name]
		if !ok {
			bad("env %s: not a setting of the server (%s)", e.Name, configFile)
			continue
		}
		if e.ValueFrom == nil {
			if err := valueFits(s, e.Value); err != nil {
				bad("env %s=%q: %v", e.Name, e.Value, err)
			}
		}
	}
	for _, name := range []string{"REDIS_URL", "DATABASE_URL", "WR_SECRET", "WR_ADMIN_TOKEN"} {
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			bad("env %s: must come from a Secret (empty means a per-process stand-in: single instance only)", name)
			continue
		}
		checkSecretKey(m, e.ValueFrom.SecretKeyRef, bad)
	}
	value := func(name string) string { // the literal value, else the server's default
		if e, ok := env[name]; ok && e.ValueFrom == nil {
			return e.Value
		}
		return settings[name].def
	}

	// Ports: WR_ADDR, the container port, the Service's target, the probes.
	_, addrPort, err := splitPort(value("WR_ADDR"))
	if err != nil {
		bad("WR_ADDR %q: %v", value("WR_ADDR"), err)
	}
	if len(m.svc.Spec.Ports) == 0 {
		bad("Service: no port")
		return p
	}
	target, err := containerPort(c, m.svc.Spec.Ports[0].TargetPort.String())
	if err != nil {
		bad("Service targetPort: %v", err)
	} else if target.ContainerPort != addrPort {
		bad("Service targets container port %d, the server listens on %d (WR_ADDR)", target.ContainerPort, addrPort)
	}
	probe := func(what string, pr *corev1.Probe, path string) {
		if pr == nil || pr.HTTPGet == nil {
			bad("%s: want an httpGet probe on %s", what, path)
			return
		}
		if pr.HTTPGet.Path != path {
			bad("%s: path %q, want %q", what, pr.HTTPGet.Path, path)
		}
		cp, err := containerPort(c, pr.HTTPGet.Port.String())
		if err != nil {
			bad("%s: %v", what, err)
		} else if target != nil && cp.ContainerPort != target.ContainerPort {
			bad("%s: port %d, the Service targets %d", what, cp.ContainerPort, target.ContainerPort)
		}
	}
	probe("readinessProbe", c.ReadinessProbe, "/readyz")
	// Never /readyz: it is 503 at the stream budget, and a restart would drop every stream.
	probe("livenessProbe", c.LivenessProbe, "/healthz")

	// Resources.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			bad("resources: %s request and limit must both be set", r)
			continue
		}
		if req.Cmp(lim) > 0 {
			bad("resources: %s request %s above limit %s", r, req.String(), lim.String())
		}
	}

	// Shutdown: the grace period covers the preStop sleep and the server's whole graceful
	// shutdown (bounded by WR_SHUTDOWN_TIMEOUT).
	var preStop time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		bad("lifecycle.preStop.sleep: missing (the pod must leave the endpoints before SIGTERM)")
	} else {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	shutdown, err := time.ParseDuration(value("WR_SHUTDOWN_TIMEOUT"))
	if err != nil {
		bad("WR_SHUTDOWN_TIMEOUT: %v", err)
	}
	if pod.TerminationGracePeriodSeconds == nil {
		bad("terminationGracePeriodSeconds: not set (default 30 s)")
	} else if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= preStop+shutdown {
		bad("terminationGracePeriodSeconds %v is not longer than the preStop sleep %v + WR_SHUTDOWN_TIMEOUT %v", grace, preStop, shutdown)
	}

	// Security: non-root, read-only root file system, no privilege escalation.
	psc, csc := pod.SecurityContext, c.SecurityContext
	nonRoot := (csc != nil && csc.RunAsNonRoot != nil && *csc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	uid := (csc != nil && csc.RunAsUser != nil && *csc.RunAsUser != 0) || (psc != nil && psc.RunAsUser != nil && *psc.RunAsUser != 0)
	if !nonRoot || !uid {
		bad("securityContext: want runAsNonRoot and a numeric non-zero runAsUser (the image's USER is a name)")
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		bad("securityContext: readOnlyRootFilesystem must be true")
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		bad("securityContext: allowPrivilegeEscalation must be false")
	}

	// Spread over nodes.
	spread := false
	for i, t := range pod.TopologySpreadConstraints {
		selects(fmt.Sprintf("topologySpreadConstraints[%d]", i), t.LabelSelector)
		spread = spread || t.TopologyKey == "kubernetes.io/hostname"
	}
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		for i, t := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			selects(fmt.Sprintf("podAntiAffinity[%d]", i), t.PodAffinityTerm.LabelSelector)
			spread = spread || t.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname"
		}
		for i, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			selects(fmt.Sprintf("podAntiAffinity required[%d]", i), t.LabelSelector)
			spread = spread || t.TopologyKey == "kubernetes.io/hostname"
		}
	}
	if !spread {
		bad("no topology spread or anti-affinity over kubernetes.io/hostname")
	}

	// Rolling updates never run below the replica count.
	if s := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || s == nil ||
		s.MaxUnavailable == nil || s.MaxUnavailable.String() != "0" {
		bad("Deployment: want a RollingUpdate with maxUnavailable 0 (start the new pod before stopping an old one)")
	}

	// Budgets.
	maxStreams, err1 := strconv.Atoi(value("WR_MAX_STREAMS"))
	maxConns, err2 := strconv.Atoi(value("WR_MAX_CONNS"))
	switch {
	case err1 != nil || err2 != nil:
		bad("WR_MAX_STREAMS / WR_MAX_CONNS: not numbers")
	case maxStreams == 0:
		bad("WR_MAX_STREAMS: set it (derived from the open-file limit it does not follow the memory limit)")
	case maxConns != 0 && maxStreams >= maxConns:
		bad("WR_MAX_STREAMS %d must be below WR_MAX_CONNS %d (room for joins and health checks)", maxStreams, maxConns)
	}

	// PDB.
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || mu.String() != "1" {
		bad("PodDisruptionBudget: want maxUnavailable 1")
	}

	// HPA: the Deployment, a Pods metric sse_connections below the stream budget with room
	// for one lost pod, CPU, and a slow scale-down.
	h := m.hpa
	if ref := h.Spec.ScaleTargetRef; ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
		bad("HPA: targets %s %s %q, not the Deployment %q", ref.APIVersion, ref.Kind, ref.Name, d.Name)
	}
	minR := int32(1)
	if h.Spec.MinReplicas != nil {
		minR = *h.Spec.MinReplicas
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < minR || *d.Spec.Replicas > h.Spec.MaxReplicas {
		bad("Deployment replicas must be set within the HPA's %d..%d", minR, h.Spec.MaxReplicas)
	}
	var streams, cpu bool
	for _, mt := range h.Spec.Metrics {
		switch {
		case mt.Type == autoscalingv2.PodsMetricSourceType && mt.Pods != nil && mt.Pods.Metric.Name == "sse_connections":
			streams = true
			t := mt.Pods.Target
			if t.Type != autoscalingv2.AverageValueMetricType || t.AverageValue == nil {
				bad("HPA: sse_connections needs an AverageValue target")
				continue
			}
			avg := t.AverageValue.Value()
			if limit := int64(maxStreams) * int64(minR-1) / int64(max(minR, 1)); maxStreams > 0 && avg > limit {
				bad("HPA: sse_connections target %d per pod; one of %d pods lost would push the others past WR_MAX_STREAMS %d (want ≤ %d)", avg, minR, maxStreams, limit)
			}
		case mt.Type == autoscalingv2.ResourceMetricSourceType && mt.Resource != nil && mt.Resource.Name == corev1.ResourceCPU:
			cpu = true
		}
	}
	if !streams {
		bad("HPA: no Pods metric named sse_connections")
	}
	if !cpu {
		bad("HPA: no cpu Resource metric")
	}
	if b := h.Spec.Behavior; b == nil || b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil ||
		*b.ScaleDown.StabilizationWindowSeconds < 300 {
		bad("HPA: scaleDown.stabilizationWindowSeconds must be set, ≥ 300 s (each removed pod ends all its streams)")
	} else {
		for _, pol := range b.ScaleDown.Policies {
			if pol.Type == autoscalingv2.PodsScalingPolicy && pol.Value > 1 {
				bad("HPA: scale-down removes %d pods per %d s; one at a time", pol.Value, pol.PeriodSeconds)
			}
		}
	}

	// Ingress: routes to the Service's port, unbuffered, reads longer than the heartbeat;
	// each public path once; bodies as the server takes them (100 KiB only where the logo
	// upload is); a hashed asset of another release tried on the next pod, API answers never.
	heartbeat, _ := time.ParseDuration(value("WR_HEARTBEAT"))
	validPath := regexp.MustCompile(`^/[A-Za-z0-9/_-]*$`)
	routed := map[string]string{} // path → the Ingress routing it
	for _, ing := range m.ings {
		an := ing.Annotations
		if an["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
			bad("Ingress %s: nginx.ingress.kubernetes.io/proxy-buffering must be \"off\" (SSE)", ing.Name)
		}
		for _, k := range []string{"nginx.ingress.kubernetes.io/proxy-read-timeout", "nginx.ingress.kubernetes.io/proxy-send-timeout"} {
			if s, err := strconv.Atoi(an[k]); err != nil || time.Duration(s)*time.Second < 4*heartbeat {
				bad("Ingress %s: %s=%q must be whole seconds, at least 4 heartbeats (%v)", ing.Name, k, an[k], 4*heartbeat)
			}
		}
		body, err := nginxSize(an["nginx.ingress.kubernetes.io/proxy-body-size"])
		if err != nil {
			bad("Ingress %s: proxy-body-size: %v", ing.Name, err)
		}
		checkAdminReach(ing, bad)
		next := strings.Fields(an["nginx.ingress.kubernetes.io/proxy-next-upstream"])
		tries, err := strconv.Atoi(an["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"])
		servesStatic := false
		for _, r := range ing.Spec.Rules {
			for _, path := range pathsOf(r) {
				servesStatic = servesStatic || path.Path == "/static"
			}
		}
		switch {
		case servesStatic && (err != nil || tries != 0):
			// A hashed asset is on the pods of its release only: during a rolling update (up to
			// the HPA's 16 pods and a surge) a bound of a few tries can miss every new pod. nginx
			// tries each pod at most once per request, so 0 ("no limit") is every pod once.
			bad("Ingress %s: path /static needs proxy-next-upstream-tries \"0\" (every pod once), has %q", ing.Name, an["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"])
		case !servesStatic && (err != nil || tries < 2 || tries > 5):
			bad("Ingress %s: proxy-next-upstream-tries=%q: want a bound of 2 to 5", ing.Name, an["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"])
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for _, path := range r.HTTP.Paths {
				if other, dup := routed[path.Path]; dup {
					bad("Ingress path %s: routed by both %s and %s", path.Path, other, ing.Name)
				}
				routed[path.Path] = ing.Name
				switch wantBody := int64(maxBody); {
				case path.Path == "/admin" && body != maxLogo:
					bad("Ingress %s: path /admin (the logo upload) needs proxy-body-size 100k (%d bytes), has %d", ing.Name, maxLogo, body)
				case path.Path != "/admin" && body != wantBody:
					bad("Ingress %s: path %s needs proxy-body-size 64k (%d bytes, the server's limit), has %d", ing.Name, path.Path, wantBody, body)
				}
				has404 := slices.Contains(next, "http_404")
				if path.Path == "/static" && !has404 {
					bad("Ingress %s: path /static needs proxy-next-upstream http_404 (a hashed asset of another release is on the next pod)", ing.Name)
				}
				if path.Path != "/static" && has404 {
					bad("Ingress %s: path %s must not retry a 404 (queue_not_found is an answer)", ing.Name, path.Path)
				}
				checkPath(m, path, validPath, bad)
			}
		}
	}
	for _, want := range []string{"/", "/api", "/q", "/static", "/admin", "/.well-known/jwks.json"} {
		if _, ok := routed[want]; !ok {
			bad("Ingress: no path %s", want)
		}
	}

	// Kustomization: lists every manifest (not the examples), and only files that exist.
	if k := m.kust; k != nil {
		for _, f := range k.Resources {
			if !slices.Contains(m.files, f) {
				bad("kustomization.yaml: resource %s does not exist", f)
			}
		}
		for _, f := range m.files {
			if f != "kustomization.yaml" && !strings.HasSuffix(f, ".example.yaml") && !slices.Contains(k.Resources, f) {
				bad("kustomization.yaml: %s is not listed", f)
			}
		}
	}
	return p
}

// The server's body limits (web: maxBody; branding.MaxLogoBytes for the logo upload).
const (
	maxBody = 64 << 10
	maxLogo = 100 << 10
)

// nginxSize reads an nginx size ("64k", "1m", "512"): k and m are 1024 and 1024².
func nginxSize(v string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "k"), strings.HasSuffix(v, "K"):
		mult, v = 1<<10, v[:len(v)-1]
	case strings.HasSuffix(v, "m"), strings.HasSuffix(v, "M"):
		mult, v = 1<<20, v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not an nginx size", v)
	}
	return n * mult, nil
}

// allowList is ingress-nginx's annotation that limits who reaches an Ingress's paths.
const allowList = "nginx.ingress.kubernetes.io/whitelist-source-range"

// checkAdminReach keeps /admin off the public internet: an Ingress that routes /admin routes
// nothing else and lets only the networks of its allow-list in (valid CIDRs or addresses,
// none of them everything); an Ingress for the public paths routes nothing that would take
// /admin along (a Prefix "/", say).
func checkAdminReach(ing *networkingv1.Ingress, bad func(string, ...any)) {
	admin, public := false, false
	for _, r := range ing.Spec.Rules {
		for _, path := range pathsOf(r) {
			isAdmin := path.Path == "/admin" || strings.HasPrefix(path.Path, "/admin/")
			admin, public = admin || isAdmin, public || !isAdmin
			prefix := path.PathType == nil || *path.PathType != networkingv1.PathTypeExact
			if !isAdmin && prefix && strings.HasPrefix("/admin", strings.TrimSuffix(path.Path, "/")+"/") {
				bad("Ingress %s: path %s (%v) also routes /admin, which only the admin Ingress may", ing.Name, path.Path, pathType(path))
			}
		}
	}
	if admin && public {
		bad("Ingress %s: routes /admin beside public paths; /admin needs an Ingress of its own (its allow-list holds for all of an Ingress's paths)", ing.Name)
	}
	if !admin {
		return
	}
	ranges := ing.Annotations[allowList]
	if strings.TrimSpace(ranges) == "" {
		bad("Ingress %s: /admin needs %s (the operators' networks): without it the dashboard is on the public internet", ing.Name, allowList)
		return
	}
	for _, r := range strings.Split(ranges, ",") {
		r = strings.TrimSpace(r)
		p, err := netip.ParsePrefix(r)
		if err != nil {
			a, aerr := netip.ParseAddr(r)
			if aerr != nil {
				bad("Ingress %s: %s: %q is neither a CIDR nor an address", ing.Name, allowList, r)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Bits() == 0 {
			bad("Ingress %s: %s: %q lets everyone in", ing.Name, allowList, r)
		}
	}
}

// pathType names a path's type for a message (the API's default when unset).
func pathType(p networkingv1.HTTPIngressPath) networkingv1.PathType {
	if p.PathType == nil {
		return networkingv1.PathTypeImplementationSpecific
	}
	return *p.PathType
}

// checkPath checks one Ingress path's backend and its path type.
func checkPath(m *manifests, path networkingv1.HTTPIngressPath, validPath *regexp.Regexp, bad func(string, ...any)) {
	b := path.Backend.Service
	if b == nil || b.Name != m.svc.Name {
		bad("Ingress path %s: backend is not Service %q", path.Path, m.svc.Name)
		return
	}
	if !slices.ContainsFunc(m.svc.Spec.Ports, func(sp corev1.ServicePort) bool {
		return (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
	}) {
		bad("Ingress path %s: the Service has no port %v", path.Path, b.Port)
	}
	if pt := path.PathType; pt != nil && *pt != networkingv1.PathTypeImplementationSpecific && !validPath.MatchString(path.Path) {
		bad("Ingress path %s: %s paths may hold only [A-Za-z0-9/_-] (ingress-nginx strict-validate-path-type)", path.Path, *pt)
	}
}

// checkSecretKey checks a secretKeyRef against the example Secret, when there is one.
func checkSecretKey(m *manifests, ref *corev1.SecretKeySelector, bad func(string, ...any)) {
	if len(m.secrets) == 0 {
		return
	}
	for _, s := range m.secrets {
		if s.Name != ref.Name {
			continue
		}
		_, inString := s.StringData[ref.Key]
		_, inData := s.Data[ref.Key]
		if !inString && !inData {
			bad("Secret %q has no key %s", ref.Name, ref.Key)
		}
		return
	}
	bad("secretKeyRef: no Secret %q among the manifests", ref.Name)
}

// valueFits checks a literal value against the kind of the setting's default: a duration,
// a boolean or a number must stay one, or the server refuses to start.
func valueFits(s setting, v string) error {
	switch {
	case s.def == "":
		return nil
	case s.def == "true" || s.def == "false":
		_, err := strconv.ParseBool(v)
		return err
	}
	if _, err := strconv.ParseFloat(s.def, 64); err == nil {
		_, err := strconv.ParseFloat(v, 64)
		return err
	}
	if _, err := time.ParseDuration(s.def); err == nil {
		_, err := time.ParseDuration(v)
		return err
	}
	return nil
}

func splitPort(addr string) (string, int32, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	n, err := strconv.ParseUint(addr[i+1:], 10, 16)
	if err != nil {
		return "", 0, err
	}
	return addr[:i], int32(n), nil
}

// containerPort resolves a port given by name or number to the container's port.
func containerPort(c *corev1.Container, port string) (*corev1.ContainerPort, error) {
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return p, nil
		}
	}
	return nil, fmt.Errorf("container %s has no port %q", c.Name, port)
}

func load(t *testing.T) (*manifests, map[string]setting) {
	t.Helper()
	settings, err := serverSettings()
	if err != nil {
		t.Fatal(err)
	}
	objs, files, err := loadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	m, problems := collect(objs, files)
	for _, p := range problems {
		t.Error(p)
	}
	return m, settings
}

// TestManifests decodes every manifest strictly and checks them against each other and the
// server's settings.
func TestManifests(t *testing.T) {
	m, settings := load(t)
	if m.kust == nil {
		t.Error("no kustomization.yaml")
	}
	for _, p := range check(m, settings) {
		t.Error(p)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d files; Deployment %s: %d replicas, grace %ds; HPA %d..%d", len(m.files), m.deploy.Name,
		*m.deploy.Spec.Replicas, *m.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds, *m.hpa.Spec.MinReplicas, m.hpa.Spec.MaxReplicas)
}

// TestStrictDecoding shows that a misspelled, miscased or doubled field, an unknown kind or
// version, and a wrongly typed value fail — the mistakes a lenient decoder drops silently.
func TestStrictDecoding(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      %s
      containers:
        - name: x
          image: x
          ports:
            - %s: 8080
`
	for _, tc := range []struct {
		name, doc, want string // want "" = decodes
	}{
		{"valid", fmt.Sprintf(deployment, "terminationGracePeriodSeconds: 35", "containerPort"), ""},
		{"misspelled pod field", fmt.Sprintf(deployment, "terminationGracePeriodSecond: 35", "containerPort"), `unknown field "spec.template.spec.terminationGracePeriodSecond"`},
		{"field in the wrong case", fmt.Sprintf(deployment, "terminationGracePeriodSeconds: 35", "ContainerPort"), `unknown field "spec.template.spec.containers[0].ports[0].ContainerPort"`},
		{"duplicate field", fmt.Sprintf(deployment, "terminationGracePeriodSeconds: 35\n      terminationGracePeriodSeconds: 40", "containerPort"), `already set in map`},
		{"misspelled kind", "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n", "unknown kind apps/v1 Deploymnet"},
		{"removed version", "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: x}\n", "unknown kind autoscaling/v2beta2"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "no apiVersion or kind"},
		{"misspelled HPA behavior", `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}
  maxReplicas: 3
  behavior:
    scaleDown:
      stabilisationWindowSeconds: 600
`, `unknown field "spec.behavior.scaleDown.stabilisationWindowSeconds"`},
		{"annotation not a string", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: x\n  annotations:\n    nginx.ingress.kubernetes.io/proxy-read-timeout: 3600\n", "cannot unmarshal number"},
		{"misspelled probe", `apiVersion: v1
kind: Pod
metadata: {name: x}
spec:
  containers:
    - name: x
      image: x
      readinesProbe: {httpGet: {path: /readyz, port: 8080}}
`, `unknown field "spec.containers[0].readinesProbe"`},
		{"misspelled kustomization field", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresource:\n  - a.yaml\n", `unknown field "resource"`},
		{"kustomization field in the wrong case", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nResources:\n  - a.yaml\n", `unknown field "Resources"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := splitDocuments([]byte(tc.doc))
			if err != nil || len(docs) != 1 {
				t.Fatalf("split: %d documents, %v", len(docs), err)
			}
			_, err = decode(docs[0])
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("decode: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("decoded; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q; want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestChecksCatchMistakes breaks the real manifests one way at a time and expects check to
// say so: the semantic checks are not vacuous.
func TestChecksCatchMistakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(m *manifests)
		want   string
	}{
		{"readiness on another path", func(m *manifests) { m.deploy.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/healthz" }, `readinessProbe: path "/healthz"`},
		{"liveness on /readyz", func(m *manifests) { m.deploy.Spec.Template.Spec.Containers[0].LivenessProbe.HTTPGet.Path = "/readyz" }, `livenessProbe: path "/readyz"`},
		{"service targets a missing port", func(m *manifests) { m.svc.Spec.Ports[0].TargetPort.StrVal = "web" }, `has no port "web"`},
		{"server listens elsewhere", func(m *manifests) { setEnv(m, "WR_ADDR", ":9090") }, "the server listens on 9090"},
		{"unknown setting", func(m *manifests) { setEnv(m, "WR_DRAIN_TIME", "30s") }, "env WR_DRAIN_TIME: not a setting"},
		{"duration without unit", func(m *manifests) { setEnv(m, "WR_SHUTDOWN_TIMEOUT", "15") }, `env WR_SHUTDOWN_TIMEOUT="15"`},
		{"grace too short", func(m *manifests) { g := int64(20); m.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds = &g }, "is not longer than the preStop sleep"},
		{"no preStop", func(m *manifests) { m.deploy.Spec.Template.Spec.Containers[0].Lifecycle = nil }, "lifecycle.preStop.sleep: missing"},
		{"pod labels changed", func(m *manifests) {
			m.deploy.Spec.Template.Labels = map[string]string{"app.kubernetes.io/name": "other"}
		}, "Service: selector"},
		{"pdb selects nothing", func(m *manifests) { m.pdb.Spec.Selector.MatchLabels = map[string]string{"app": "x"} }, "PodDisruptionBudget: selector"},
		{"hpa targets another deployment", func(m *manifests) { m.hpa.Spec.ScaleTargetRef.Name = "web" }, `HPA: targets apps/v1 Deployment "web"`},
		{"hpa without the stream metric", func(m *manifests) { m.hpa.Spec.Metrics[0].Pods.Metric.Name = "sse_connection" }, "no Pods metric named sse_connections"},
		{"hpa target at the budget", func(m *manifests) { setEnv(m, "WR_MAX_STREAMS", "15000") }, "past WR_MAX_STREAMS"},
		{"no memory limit", func(m *manifests) {
			delete(m.deploy.Spec.Template.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		}, "memory request and limit"},
		{"writable root", func(m *manifests) {
			f := false
			m.deploy.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = &f
		}, "readOnlyRootFilesystem"},
		{"secret key missing", func(m *manifests) { delete(m.secrets[0].StringData, "WR_SECRET") }, "has no key WR_SECRET"},
		{"buffering ingress", func(m *manifests) { delete(m.ings[0].Annotations, "nginx.ingress.kubernetes.io/proxy-buffering") }, "proxy-buffering"},
		{"logo refused at the edge", func(m *manifests) {
			ingressOf(t, m, "/admin").Annotations["nginx.ingress.kubernetes.io/proxy-body-size"] = "64k"
		}, "path /admin (the logo upload) needs proxy-body-size 100k"},
		{"large bodies on the buyer API", func(m *manifests) {
			ingressOf(t, m, "/api").Annotations["nginx.ingress.kubernetes.io/proxy-body-size"] = "1m"
		}, "path /api needs proxy-body-size 64k"},
		{"another release's asset not retried", func(m *manifests) {
			ingressOf(t, m, "/static").Annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"] = "error timeout http_502"
		}, "path /static needs proxy-next-upstream http_404"},
		{"API 404 retried", func(m *manifests) {
			ingressOf(t, m, "/api").Annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"] = "error timeout http_404"
		}, "must not retry a 404"},
		{"retries unbounded", func(m *manifests) {
			delete(ingressOf(t, m, "/api").Annotations, "nginx.ingress.kubernetes.io/proxy-next-upstream-tries")
		}, "want a bound of 2 to 5"},
		{"another release's asset tried on a few pods only", func(m *manifests) {
			ingressOf(t, m, "/static").Annotations["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"] = "3"
		}, `path /static needs proxy-next-upstream-tries "0"`},
		{"a path routed twice", func(m *manifests) {
			ing := ingressOf(t, m, "/static")
			ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, ingressOf(t, m, "/api").Spec.Rules[0].HTTP.Paths[1])
		}, "routed by both"},
		{"admin open to everyone", func(m *manifests) { delete(ingressOf(t, m, "/admin").Annotations, allowList) }, "without it the dashboard is on the public internet"},
		{"admin allow-list of everything", func(m *manifests) { ingressOf(t, m, "/admin").Annotations[allowList] = "10.0.0.0/8, 0.0.0.0/0" }, `"0.0.0.0/0" lets everyone in`},
		{"admin allow-list not a range", func(m *manifests) { ingressOf(t, m, "/admin").Annotations[allowList] = "office" }, `"office" is neither a CIDR nor an address`},
		{"admin beside the public paths", func(m *manifests) {
			pub := ingressOf(t, m, "/api")
			pub.Spec.Rules[0].HTTP.Paths = append(pub.Spec.Rules[0].HTTP.Paths, ingressOf(t, m, "/admin").Spec.Rules[0].HTTP.Paths[0])
		}, "routes /admin beside public paths"},
		{"public prefix that takes /admin along", func(m *manifests) {
			p := networkingv1.PathTypePrefix
			ingressOf(t, m, "/api").Spec.Rules[0].HTTP.Paths[0].PathType = &p // the Exact "/"
		}, "path / (Prefix) also routes /admin"},
		{"unlisted manifest", func(m *manifests) { m.kust.Resources = m.kust.Resources[1:] }, "is not listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, settings := load(t)
			tc.mutate(m)
			problems := check(m, settings)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("want a problem containing %q, got %q", tc.want, problems)
			}
		})
	}
}

// ingressOf is the Ingress that routes path.
func ingressOf(t *testing.T, m *manifests, path string) *networkingv1.Ingress {
	t.Helper()
	for _, ing := range m.ings {
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				if p.Path == path {
					return ing
				}
			}
		}
	}
	t.Fatalf("no Ingress routes %s", path)
	return nil
}

func setEnv(m *manifests, name, value string) {
	c := &m.deploy.Spec.Template.Spec.Containers[0]
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// pathsOf is the HTTP paths of an Ingress rule (none for a rule without http).
func pathsOf(r networkingv1.IngressRule) []networkingv1.HTTPIngressPath {
	if r.HTTP == nil {
		return nil
	}
	return r.HTTP.Paths
}
