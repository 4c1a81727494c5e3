// Package chart tests the orderwatch Helm chart by decoding what it renders.
//
// The manifests come from ORDERWATCH_RENDERED_DIR (check.sh renders
// <case>.yaml there with the same release, namespace and Kubernetes version
// as renderArgs) or, when that is unset, from the helm binary (HELM, PATH or
// GOPATH/bin); without either the tests skip. Every document is decoded
// strictly into its k8s.io/api type: an unknown or misspelt field, a
// duplicate key or an unexpected kind fails.
package chart

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// What check.sh renders with; the tests assert the namespace, so a drift shows.
const (
	chartDir    = "orderwatch"
	release     = "orderwatch"
	namespace   = "orderwatch"
	kubeVersion = "1.25.0" // the chart's minimum (Chart.yaml kubeVersion)

	stateDir  = "/var/lib/orderwatch"
	statePath = stateDir + "/state.db"
)

func renderArgs(valuesFile string) []string {
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	return args
}

// chartCase is one rendering of the chart and what it must contain.
type chartCase struct {
	name   string // rendered file <name>.yaml
	values string // values file relative to deploy/helm; "" = the chart's defaults

	fullname       string
	image          string
	serviceAccount string
	httpPort       int32
	grace          int64
	commonLabels   map[string]string
	resources      corev1.ResourceRequirements

	persistence  bool
	storageSize  string
	storageClass *string

	chartSecret      bool                 // the chart creates the Secret (no existingSecret)
	secretName       string               // the Secret the password files come from
	plentyKey        string               // its key holding the REST password
	natsPasswordKey  string               // "" = no NATS password file
	natsTokenKey     string               // "" = no NATS token file
	natsFileSecrets  map[string][2]string // WATCHER_NATS_{CREDS,NKEY,TLS_*} -> Secret name, key
	serviceMonitor   bool
	pdb              bool
	configExact      map[string]string // ConfigMap entries with an exact value
	configAbsent     []string          // ConfigMap entries that must not be set
	everyVariableSet bool              // every variable of `watcher help` is set (but plain secrets)
}

func ptr[T any](v T) *T { return &v }

func rr(reqCPU, reqMem, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(reqCPU), corev1.ResourceMemory: resource.MustParse(reqMem)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limMem)},
	}
}

var cases = []chartCase{
	{
		name:           "default",
		fullname:       "orderwatch",
		image:          "ghcr.io/orderwatch/orderwatch:0.1.0",
		serviceAccount: "orderwatch",
		httpPort:       9090,
		grace:          30,
		resources:      rr("50m", "64Mi", "256Mi"),
		persistence:    true,
		storageSize:    "1Gi",
		chartSecret:    true,
		secretName:     "orderwatch",
		plentyKey:      "plenty-password",
		configExact: map[string]string{
			"WATCHER_STATE_PATH":       statePath,
			"WATCHER_HTTP_ADDR":        ":9090",
			"WATCHER_SHUTDOWN_TIMEOUT": "20s",
			"WATCHER_STREAM":           "ORDERS",
			"WATCHER_NATS_URL":         "nats://nats:4222",
			"WATCHER_LOG_FORMAT":       "json",
			"WATCHER_OUTBOX_MAX":       "100000",
			"WATCHER_CALL_SHARE":       "0.25",
		},
		configAbsent: []string{"WATCHER_NATS_USER", "WATCHER_SOURCE", "WATCHER_SCOPE", "WATCHER_SCOPE_JSON", "WATCHER_WITH"},
	},
	{
		name:            "full",
		values:          "testdata/full-values.yaml",
		fullname:        "orderwatch",
		image:           "registry.example/orderwatch@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		serviceAccount:  "orderwatch-runner",
		httpPort:        8080,
		grace:           60,
		commonLabels:    map[string]string{"team": "fulfilment", "cost-center": "4711"},
		resources:       rr("100m", "128Mi", "512Mi"),
		persistence:     true,
		storageSize:     "5Gi",
		storageClass:    ptr("fast-ssd"),
		secretName:      "orderwatch-credentials",
		plentyKey:       "rest-password",
		natsPasswordKey: "nats-pass",
		natsTokenKey:    "nats-tok",
		natsFileSecrets: map[string][2]string{
			"WATCHER_NATS_CREDS":    {"orderwatch-nats-creds", "user.creds"},
			"WATCHER_NATS_NKEY":     {"orderwatch-nats-nkey", "seed.nk"},
			"WATCHER_NATS_TLS_CA":   {"orderwatch-nats-tls", "ca.pem"},
			"WATCHER_NATS_TLS_CERT": {"orderwatch-nats-tls", "client.pem"},
			"WATCHER_NATS_TLS_KEY":  {"orderwatch-nats-tls", "client-key.pem"},
		},
		serviceMonitor: true,
		pdb:            true,
		configExact: map[string]string{
			"WATCHER_STATE_PATH":       statePath,
			"WATCHER_HTTP_ADDR":        ":8080",
			"WATCHER_SHUTDOWN_TIMEOUT": "45s",
			"WATCHER_STREAM":           "SHOP_ORDERS",
			"WATCHER_STREAM_MAX_BYTES": "10737418240", // not 1.073741824e+10
			"WATCHER_OUTBOX_MAX":       "1000000",     // not 1e+06
			"WATCHER_CALL_SHARE":       "0.1",
			"WATCHER_WITH":             "addresses,orderItems",
			"WATCHER_START_FROM":       "2025-01-01T00:00:00+01:00",
			"WATCHER_LOG_FORMAT":       "text",
			"WATCHER_BAD_ENTRIES":      "skip",
		},
		everyVariableSet: true,
	},
	{
		name:            "ephemeral",
		values:          "testdata/ephemeral-values.yaml",
		fullname:        "orderwatch",
		image:           "ghcr.io/orderwatch/orderwatch:0.1.0",
		serviceAccount:  "orderwatch",
		httpPort:        9090,
		grace:           30,
		resources:       rr("50m", "64Mi", "256Mi"),
		persistence:     false,
		chartSecret:     true,
		secretName:      "orderwatch",
		plentyKey:       "plenty-password",
		natsPasswordKey: "nats-password",
		natsTokenKey:    "nats-token",
		configExact: map[string]string{
			"WATCHER_STREAM":     "", // core NATS: set and empty, not the binary's ORDERS
			"WATCHER_NATS_USER":  "demo",
			"WATCHER_STATE_PATH": statePath,
		},
	},
}

// --- rendering and strict decoding ---------------------------------------

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes; strict decoding makes any other field a failure.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// manifests is one rendering, by kind and name.
type manifests struct {
	statefulSets    map[string]*appsv1.StatefulSet
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	serviceAccounts map[string]*corev1.ServiceAccount
	pdbs            map[string]*policyv1.PodDisruptionBudget
	pods            map[string]*corev1.Pod
	serviceMonitors map[string]*serviceMonitor
	metas           []objectRef
}

type objectRef struct {
	kind string
	meta *metav1.ObjectMeta
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict converts YAML to JSON (duplicate keys fail) and decodes it
// with unknown fields disallowed.
func decodeStrict(doc []byte, into any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	return nil
}

func decodeInto[T any](m map[string]*T, doc []byte, meta func(*T) *metav1.ObjectMeta) (*T, error) {
	v := new(T)
	if err := decodeStrict(doc, v); err != nil {
		return nil, err
	}
	name := meta(v).Name
	if _, dup := m[name]; dup {
		return nil, fmt.Errorf("rendered twice")
	}
	m[name] = v
	return v, nil
}

func parseManifests(t *testing.T, out []byte) *manifests {
	t.Helper()
	m := &manifests{
		statefulSets:    map[string]*appsv1.StatefulSet{},
		services:        map[string]*corev1.Service{},
		configMaps:      map[string]*corev1.ConfigMap{},
		secrets:         map[string]*corev1.Secret{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		pods:            map[string]*corev1.Pod{},
		serviceMonitors: map[string]*serviceMonitor{},
	}
	for i, doc := range docSep.Split(string(out), -1) {
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("document %d: not YAML: %v\n%s", i, err, doc)
		}
		if string(j) == "null" { // only comments
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		gvk := tm.APIVersion + " " + tm.Kind
		var (
			meta *metav1.ObjectMeta
			derr error
		)
		switch gvk {
		case "apps/v1 StatefulSet":
			var v *appsv1.StatefulSet
			if v, derr = decodeInto(m.statefulSets, []byte(doc), func(o *appsv1.StatefulSet) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "v1 Service":
			var v *corev1.Service
			if v, derr = decodeInto(m.services, []byte(doc), func(o *corev1.Service) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "v1 ConfigMap":
			var v *corev1.ConfigMap
			if v, derr = decodeInto(m.configMaps, []byte(doc), func(o *corev1.ConfigMap) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "v1 Secret":
			var v *corev1.Secret
			if v, derr = decodeInto(m.secrets, []byte(doc), func(o *corev1.Secret) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "v1 ServiceAccount":
			var v *corev1.ServiceAccount
			if v, derr = decodeInto(m.serviceAccounts, []byte(doc), func(o *corev1.ServiceAccount) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "policy/v1 PodDisruptionBudget":
			var v *policyv1.PodDisruptionBudget
			if v, derr = decodeInto(m.pdbs, []byte(doc), func(o *policyv1.PodDisruptionBudget) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "v1 Pod":
			var v *corev1.Pod
			if v, derr = decodeInto(m.pods, []byte(doc), func(o *corev1.Pod) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "monitoring.coreos.com/v1 ServiceMonitor":
			var v *serviceMonitor
			if v, derr = decodeInto(m.serviceMonitors, []byte(doc), func(o *serviceMonitor) *metav1.ObjectMeta { return &o.Metadata }); v != nil {
				meta = &v.Metadata
			}
		default:
			t.Fatalf("document %d: unexpected kind %q\n%s", i, gvk, doc)
		}
		if derr != nil {
			t.Fatalf("document %d (%s): strict decode: %v\n%s", i, gvk, derr, doc)
		}
		m.metas = append(m.metas, objectRef{kind: tm.Kind, meta: meta})
	}
	return m
}

// helmBinary finds helm: $HELM, PATH, then GOPATH/bin (where check.sh installs it).
func helmBinary() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		if h := filepath.Join(dir, "bin", "helm"); isExecutable(h) {
			return h
		}
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func needHelm(t *testing.T) string {
	t.Helper()
	h := helmBinary()
	if h == "" {
		t.Skip("helm not found (HELM, PATH, GOPATH/bin): " +
			"run deploy/helm/check.sh, which installs a pinned helm and renders the chart")
	}
	return h
}

func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(needHelm(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// render returns the case's manifests: check.sh's file, or helm's output.
func render(t *testing.T, c chartCase) *manifests {
	t.Helper()
	if dir := os.Getenv("ORDERWATCH_RENDERED_DIR"); dir != "" {
		out, err := os.ReadFile(filepath.Join(dir, c.name+".yaml"))
		if err != nil {
			t.Fatalf("ORDERWATCH_RENDERED_DIR is set: %v", err)
		}
		return parseManifests(t, out)
	}
	out, err := runHelm(t, renderArgs(c.values)...)
	if err != nil {
		t.Fatal(err)
	}
	return parseManifests(t, out)
}

// --- the tests -------------------------------------------------------------

func TestChart(t *testing.T) {
	allowed := loadEnvVars(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := render(t, c)
			checkObjects(t, c, m)
			sts := checkStatefulSet(t, c, m)
			cm := checkConfigMap(t, c, m, allowed)
			watcher := sts.Spec.Template.Spec.Containers[0]
			checkSecretFiles(t, c, m, "StatefulSet", &sts.Spec.Template.Spec, watcher)
			checkTestPod(t, c, m, sts)
			checkEnvNames(t, c, cm, allowed, sts.Spec.Template.Spec, m.pods[c.fullname+"-check"].Spec)
			checkServices(t, c, m, sts)
			checkServiceMonitor(t, c, m)
			checkPDB(t, c, m, sts)
		})
	}
}

// loadEnvVars reads testdata/env-vars.txt: the variables `watcher help`
// lists (check.sh regenerates and diffs it).
func loadEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("testdata/env-vars.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v := strings.TrimSpace(sc.Text()); v != "" {
			if !strings.HasPrefix(v, "WATCHER_") {
				t.Fatalf("env-vars.txt: %q is not a WATCHER_ variable", v)
			}
			vars[v] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vars) < 10 {
		t.Fatalf("env-vars.txt lists %d variables; regenerate it with check.sh", len(vars))
	}
	return vars
}

func checkObjects(t *testing.T, c chartCase, m *manifests) {
	t.Helper()
	want := map[string][]string{
		"StatefulSet": {c.fullname},
		"Service":     {c.fullname + "-headless", c.fullname + "-metrics"},
		"ConfigMap":   {c.fullname},
		"Pod":         {c.fullname + "-check"},
	}
	if c.chartSecret {
		want["Secret"] = []string{c.fullname}
	}
	want["ServiceAccount"] = []string{c.serviceAccount}
	if c.pdb {
		want["PodDisruptionBudget"] = []string{c.fullname}
	}
	if c.serviceMonitor {
		want["ServiceMonitor"] = []string{c.fullname}
	}
	got := map[string][]string{}
	for _, o := range m.metas {
		got[o.kind] = append(got[o.kind], o.meta.Name)
		if o.meta.Namespace != namespace {
			t.Errorf("%s %s: namespace %q, want %q", o.kind, o.meta.Name, o.meta.Namespace, namespace)
		}
		if len(o.meta.Name) > 63 {
			t.Errorf("%s %s: name longer than 63", o.kind, o.meta.Name)
		}
		for k, v := range c.commonLabels {
			if o.meta.Labels[k] != v {
				t.Errorf("%s %s: label %s=%q, want %q (commonLabels)", o.kind, o.meta.Name, k, o.meta.Labels[k], v)
			}
		}
	}
	for k := range got {
		sort.Strings(got[k])
	}
	for k := range want {
		sort.Strings(want[k])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
	}
	for _, sa := range m.serviceAccounts {
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s: automountServiceAccountToken must be false", sa.Name)
		}
	}
}

// The restricted security context, exactly.
var (
	wantPodSecurity = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      ptr(int64(65532)),
		RunAsGroup:     ptr(int64(65532)),
		FSGroup:        ptr(int64(65532)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	wantContainerSecurity = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
)

func checkStatefulSet(t *testing.T, c chartCase, m *manifests) *appsv1.StatefulSet {
	t.Helper()
	sts := m.statefulSets[c.fullname]
	if sts == nil {
		t.Fatalf("no StatefulSet %s", c.fullname)
	}
	s := sts.Spec
	if s.Replicas == nil || *s.Replicas != 1 {
		t.Errorf("replicas = %s, want exactly 1 (bbolt's exclusive lock, one session)", js(s.Replicas))
	}
	if s.PodManagementPolicy != "" && s.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
		t.Errorf("podManagementPolicy %q: want OrderedReady (the old pod is gone before the new one starts)", s.PodManagementPolicy)
	}
	if s.ServiceName != c.fullname+"-headless" {
		t.Errorf("serviceName %q, want the headless Service %s-headless", s.ServiceName, c.fullname)
	}
	sel := selector(t, s.Selector)
	if !sel.Matches(labels.Set(s.Template.Labels)) {
		t.Errorf("selector %v does not match the pod labels %v", sel, s.Template.Labels)
	}

	// State: a ReadWriteOnce claim template, or an emptyDir without persistence.
	pod := s.Template.Spec
	vols := volumesByName(pod.Volumes)
	if c.persistence {
		if len(s.VolumeClaimTemplates) != 1 {
			t.Fatalf("volumeClaimTemplates: %d, want 1", len(s.VolumeClaimTemplates))
		}
		vct := s.VolumeClaimTemplates[0]
		if vct.Name != "state" {
			t.Errorf("claim template %q, want state", vct.Name)
		}
		if !reflect.DeepEqual(vct.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
			t.Errorf("claim access modes %v, want [ReadWriteOnce]", vct.Spec.AccessModes)
		}
		if got := vct.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse(c.storageSize)) != 0 {
			t.Errorf("claim size %s, want %s", got.String(), c.storageSize)
		}
		if !reflect.DeepEqual(vct.Spec.StorageClassName, c.storageClass) {
			t.Errorf("storageClassName %v, want %v", deref(vct.Spec.StorageClassName), deref(c.storageClass))
		}
		// volumeClaimTemplates are immutable: labels that change with the
		// chart or app version would break every upgrade.
		for _, k := range []string{"helm.sh/chart", "app.kubernetes.io/version"} {
			if _, ok := vct.Labels[k]; ok {
				t.Errorf("claim template carries the changing label %s", k)
			}
		}
		if _, ok := vols["state"]; ok {
			t.Errorf("pod volume state shadows the claim template")
		}
	} else {
		if len(s.VolumeClaimTemplates) != 0 {
			t.Errorf("persistence disabled but %d claim templates", len(s.VolumeClaimTemplates))
		}
		if v, ok := vols["state"]; !ok || v.EmptyDir == nil {
			t.Errorf("persistence disabled: want an emptyDir volume state, got %+v", v)
		}
	}

	var claims []string
	for _, vct := range s.VolumeClaimTemplates {
		claims = append(claims, vct.Name)
	}
	checkPodCommon(t, c, "StatefulSet", pod, claims...)
	if got := pod.TerminationGracePeriodSeconds; got == nil || *got != c.grace {
		t.Errorf("terminationGracePeriodSeconds %v, want %d", got, c.grace)
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("want exactly the watcher container, got %d containers, %d init", len(pod.Containers), len(pod.InitContainers))
	}
	w := pod.Containers[0]
	if w.Name != "watcher" {
		t.Errorf("container %q, want watcher", w.Name)
	}
	if !reflect.DeepEqual(w.Args, []string{"run"}) || len(w.Command) != 0 {
		t.Errorf("command %q args %q, want the image's entrypoint with args [run]", w.Command, w.Args)
	}
	checkContainerCommon(t, c, "watcher", w)
	if len(w.Ports) != 1 || w.Ports[0].Name != "http" || w.Ports[0].ContainerPort != c.httpPort {
		t.Errorf("ports %+v, want one named http on %d", w.Ports, c.httpPort)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", w.StartupProbe, "/healthz"},
		{"livenessProbe", w.LivenessProbe, "/healthz"},
		{"readinessProbe", w.ReadinessProbe, "/readyz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s: %s on %s, want %s on the port named http", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	if sp := w.StartupProbe; sp != nil && sp.PeriodSeconds*sp.FailureThreshold < 120 {
		t.Errorf("startupProbe allows %ds; want a generous budget (>= 120s)", sp.PeriodSeconds*sp.FailureThreshold)
	}

	// Writable paths with a read-only root: the state directory and /tmp.
	mounts := mountsByPath(w.VolumeMounts)
	if mt, ok := mounts[stateDir]; !ok || mt.Name != "state" || mt.ReadOnly {
		t.Errorf("want the state volume mounted read-write at %s, got %+v", stateDir, mt)
	}
	if mt, ok := mounts["/tmp"]; !ok || vols[mt.Name].EmptyDir == nil || mt.ReadOnly {
		t.Errorf("want a writable emptyDir at /tmp, got %+v", mt)
	}

	ann := s.Template.Annotations
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(ann["checksum/config"]) {
		t.Errorf("pod template annotation checksum/config = %q, want a sha256", ann["checksum/config"])
	}
	if _, ok := ann["checksum/secret"]; ok != c.chartSecret {
		t.Errorf("checksum/secret present = %v, want %v (only for the chart's own Secret)", ok, c.chartSecret)
	}
	return sts
}

// checkPodCommon: what the watcher pod and the test pod share.
// claims are the volumeClaimTemplates' names (volumes the pod spec does not list).
func checkPodCommon(t *testing.T, c chartCase, what string, pod corev1.PodSpec, claims ...string) {
	t.Helper()
	if !reflect.DeepEqual(pod.SecurityContext, wantPodSecurity) {
		t.Errorf("%s: pod securityContext\n got %s\nwant %s", what, js(pod.SecurityContext), js(wantPodSecurity))
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false", what)
	}
	if pod.ServiceAccountName != c.serviceAccount {
		t.Errorf("%s: serviceAccountName %q, want %q", what, pod.ServiceAccountName, c.serviceAccount)
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks must be false", what)
	}
	// Every Secret is mounted read-only.
	vols := volumesByName(pod.Volumes)
	for _, ctr := range pod.Containers {
		for _, mt := range ctr.VolumeMounts {
			if v, ok := vols[mt.Name]; !ok && !slices.Contains(claims, mt.Name) {
				t.Errorf("%s: mount of undefined volume %s", what, mt.Name)
			} else if v.Secret != nil && !mt.ReadOnly {
				t.Errorf("%s: Secret volume %s mounted read-write", what, mt.Name)
			}
		}
	}
}

func checkContainerCommon(t *testing.T, c chartCase, what string, ctr corev1.Container) {
	t.Helper()
	if !reflect.DeepEqual(ctr.SecurityContext, wantContainerSecurity) {
		t.Errorf("%s: container securityContext\n got %s\nwant %s", what, js(ctr.SecurityContext), js(wantContainerSecurity))
	}
	if ctr.Image != c.image {
		t.Errorf("%s: image %q, want %q", what, ctr.Image, c.image)
	}
	if !sameResources(ctr.Resources, c.resources) {
		t.Errorf("%s: resources %s, want %s", what, js(ctr.Resources), js(c.resources))
	}
	want := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: c.fullname}}}}
	if !reflect.DeepEqual(ctr.EnvFrom, want) {
		t.Errorf("%s: envFrom %s, want only the ConfigMap %s", what, js(ctr.EnvFrom), c.fullname)
	}
}

func checkConfigMap(t *testing.T, c chartCase, m *manifests, allowed map[string]bool) *corev1.ConfigMap {
	t.Helper()
	cm := m.configMaps[c.fullname]
	if cm == nil {
		t.Fatalf("no ConfigMap %s", c.fullname)
	}
	for k, want := range c.configExact {
		if got, ok := cm.Data[k]; !ok || got != want {
			t.Errorf("ConfigMap %s = %q (set: %v), want %q", k, got, ok, want)
		}
	}
	for _, k := range c.configAbsent {
		if _, ok := cm.Data[k]; ok {
			t.Errorf("ConfigMap sets %s, want it unset (binary default)", k)
		}
	}
	floaty := regexp.MustCompile(`^-?[0-9.]+e[+-]?[0-9]+$`)
	for k, v := range cm.Data {
		if floaty.MatchString(v) {
			t.Errorf("ConfigMap %s = %q: a number rendered as float", k, v)
		}
	}
	if !strings.HasPrefix(cm.Data["WATCHER_STATE_PATH"], stateDir+"/") {
		t.Errorf("WATCHER_STATE_PATH %q is not on the state volume %s", cm.Data["WATCHER_STATE_PATH"], stateDir)
	}
	if want := fmt.Sprintf(":%d", c.httpPort); cm.Data["WATCHER_HTTP_ADDR"] != want {
		t.Errorf("WATCHER_HTTP_ADDR %q, want %q (the container port http)", cm.Data["WATCHER_HTTP_ADDR"], want)
	}
	shutdown, err := time.ParseDuration(cm.Data["WATCHER_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("WATCHER_SHUTDOWN_TIMEOUT: %v", err)
	}
	// The kubelet's SIGKILL must not cut the flush short: the watcher may
	// overrun its timeout by a second or two (flush floor, HTTP shutdown).
	if time.Duration(c.grace)*time.Second < shutdown+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d must exceed WATCHER_SHUTDOWN_TIMEOUT %s by 5s at least", c.grace, shutdown)
	}
	return cm
}

// plainSecrets are the variables that would carry a secret in the pod spec
// or a ConfigMap; the chart passes files (_FILE variants) instead.
var plainSecrets = []string{"WATCHER_PLENTY_PASSWORD", "WATCHER_NATS_PASSWORD", "WATCHER_NATS_TOKEN"}

// checkSecretFiles: every secret reaches the watcher as a file in a read-only
// Secret volume, from the right Secret and key.
func checkSecretFiles(t *testing.T, c chartCase, m *manifests, what string, pod *corev1.PodSpec, ctr corev1.Container) {
	t.Helper()
	env := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("%s: %s comes from a secretKeyRef; secrets must be files", what, e.Name)
		}
		if slices.Contains(plainSecrets, e.Name) {
			t.Errorf("%s: plain secret variable %s in env", what, e.Name)
		}
		env[e.Name] = e.Value
	}
	type ref struct{ secret, key string }
	want := map[string]ref{"WATCHER_PLENTY_PASSWORD_FILE": {c.secretName, c.plentyKey}}
	if c.natsPasswordKey != "" {
		want["WATCHER_NATS_PASSWORD_FILE"] = ref{c.secretName, c.natsPasswordKey}
	}
	if c.natsTokenKey != "" {
		want["WATCHER_NATS_TOKEN_FILE"] = ref{c.secretName, c.natsTokenKey}
	}
	for v, sk := range c.natsFileSecrets {
		want[v] = ref{sk[0], sk[1]}
	}
	fileVar := regexp.MustCompile(`^WATCHER_(.*_FILE|NATS_CREDS|NATS_NKEY|NATS_TLS_.*)$`)
	for name := range env {
		if _, ok := want[name]; !ok && fileVar.MatchString(name) {
			t.Errorf("%s: unexpected secret file variable %s", what, name)
		}
	}
	vols := volumesByName(pod.Volumes)
	for name, w := range want {
		p, ok := env[name]
		if !ok {
			t.Errorf("%s: %s not set", what, name)
			continue
		}
		var mount *corev1.VolumeMount
		for i, mt := range ctr.VolumeMounts {
			if path.Dir(p) == path.Clean(mt.MountPath) {
				mount = &ctr.VolumeMounts[i]
			}
		}
		if mount == nil {
			t.Errorf("%s: %s=%s is in no mounted directory", what, name, p)
			continue
		}
		vol := vols[mount.Name]
		if vol.Secret == nil || !mount.ReadOnly {
			t.Errorf("%s: %s=%s: want a read-only Secret volume, got %s (readOnly %v)", what, name, p, js(vol.VolumeSource), mount.ReadOnly)
			continue
		}
		if vol.Secret.SecretName != w.secret {
			t.Errorf("%s: %s from Secret %q, want %q", what, name, vol.Secret.SecretName, w.secret)
		}
		var item *corev1.KeyToPath
		for i, it := range vol.Secret.Items {
			if it.Path == path.Base(p) {
				item = &vol.Secret.Items[i]
			}
		}
		if item == nil {
			t.Errorf("%s: %s=%s: Secret volume %s projects no %s", what, name, p, mount.Name, path.Base(p))
			continue
		}
		if item.Key != w.key {
			t.Errorf("%s: %s from key %q, want %q", what, name, item.Key, w.key)
		}
		if sec := m.secrets[w.secret]; c.chartSecret && w.secret == c.fullname {
			if sec == nil {
				t.Errorf("%s: %s: the chart's Secret %s is not rendered", what, name, w.secret)
			} else if _, ok := sec.Data[item.Key]; !ok {
				t.Errorf("%s: %s: the chart's Secret has no key %s", what, name, item.Key)
			}
		}
	}
}

func checkTestPod(t *testing.T, c chartCase, m *manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	p := m.pods[c.fullname+"-check"]
	if p == nil {
		t.Fatalf("no helm test pod %s-check", c.fullname)
	}
	if p.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("test pod: helm.sh/hook %q, want test", p.Annotations["helm.sh/hook"])
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("test pod: restartPolicy %q, want Never", p.Spec.RestartPolicy)
	}
	checkPodCommon(t, c, "test pod", p.Spec)
	if len(p.Spec.Containers) != 1 {
		t.Fatalf("test pod: %d containers, want 1", len(p.Spec.Containers))
	}
	ctr := p.Spec.Containers[0]
	if !reflect.DeepEqual(ctr.Args, []string{"check"}) || len(ctr.Command) != 0 {
		t.Errorf("test pod: command %q args %q, want args [check]", ctr.Command, ctr.Args)
	}
	checkContainerCommon(t, c, "test pod", ctr)
	// The running watcher holds the state file's lock: no claim, no state mount.
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Name == "state" || v.Ephemeral != nil {
			t.Errorf("test pod mounts the state (%s)", v.Name)
		}
	}
	for _, mt := range ctr.VolumeMounts {
		if mt.MountPath == stateDir || strings.HasPrefix(mt.MountPath, stateDir+"/") {
			t.Errorf("test pod mounts %s at %s", mt.Name, mt.MountPath)
		}
	}
	// The same configuration and secrets as the watcher.
	w := sts.Spec.Template.Spec.Containers[0]
	if !reflect.DeepEqual(ctr.Env, w.Env) {
		t.Errorf("test pod env differs from the watcher's:\n got %s\nwant %s", js(ctr.Env), js(w.Env))
	}
	stsVols := volumesByName(sts.Spec.Template.Spec.Volumes)
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil && !reflect.DeepEqual(v, stsVols[v.Name]) {
			t.Errorf("test pod volume %s differs from the watcher's", v.Name)
		}
	}
	checkSecretFiles(t, c, m, "test pod", &p.Spec, ctr)
	// The watcher's selectors (StatefulSet, Services, PDB) must not pick it up.
	if selector(t, sts.Spec.Selector).Matches(labels.Set(p.Labels)) {
		t.Errorf("the StatefulSet selector matches the test pod's labels %v", p.Labels)
	}
}

// checkEnvNames: every WATCHER_* name the chart sets is one `watcher help`
// lists; no name is set twice; with every option on, every variable is set.
func checkEnvNames(t *testing.T, c chartCase, cm *corev1.ConfigMap, allowed map[string]bool, pods ...corev1.PodSpec) {
	t.Helper()
	set := map[string]string{}
	for k := range cm.Data {
		if !strings.HasPrefix(k, "WATCHER_") {
			t.Errorf("ConfigMap key %s is not a WATCHER_ variable", k)
		}
		set[k] = "ConfigMap"
	}
	for _, pod := range pods {
		for _, ctr := range pod.Containers {
			seen := map[string]bool{}
			for _, e := range ctr.Env {
				if seen[e.Name] {
					t.Errorf("container %s sets %s twice", ctr.Name, e.Name)
				}
				seen[e.Name] = true
				if !strings.HasPrefix(e.Name, "WATCHER_") {
					continue
				}
				if set[e.Name] == "ConfigMap" {
					t.Errorf("%s is set in the ConfigMap and in container %s's env", e.Name, ctr.Name)
				}
				set[e.Name] = "env of " + ctr.Name
			}
		}
	}
	for k, where := range set {
		if !allowed[k] {
			t.Errorf("%s (%s) is not a variable `watcher help` lists (testdata/env-vars.txt)", k, where)
		}
	}
	for _, k := range plainSecrets {
		if _, ok := set[k]; ok {
			t.Errorf("plain secret variable %s is set; use the _FILE variant", k)
		}
	}
	if c.everyVariableSet {
		var missing []string
		for k := range allowed {
			if _, ok := set[k]; !ok && !slices.Contains(plainSecrets, k) {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s turns every option on, yet these variables are never set: %v (a chart value is missing)", c.values, missing)
		}
	}
}

func checkServices(t *testing.T, c chartCase, m *manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	podSel := sts.Spec.Selector.MatchLabels
	headless := m.services[c.fullname+"-headless"]
	metrics := m.services[c.fullname+"-metrics"]
	if headless == nil || metrics == nil {
		t.Fatalf("want the Services %[1]s-headless and %[1]s-metrics", c.fullname)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless Service: clusterIP %q, want None", headless.Spec.ClusterIP)
	}
	if metrics.Spec.Type != corev1.ServiceTypeClusterIP || metrics.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("metrics Service: type %q clusterIP %q, want a ClusterIP Service", metrics.Spec.Type, metrics.Spec.ClusterIP)
	}
	if !metrics.Spec.PublishNotReadyAddresses {
		t.Errorf("metrics Service: want publishNotReadyAddresses (metrics matter most while not ready)")
	}
	for _, svc := range []*corev1.Service{headless, metrics} {
		if !reflect.DeepEqual(svc.Spec.Selector, podSel) {
			t.Errorf("Service %s: selector %v, want the pod selector %v", svc.Name, svc.Spec.Selector, podSel)
		}
		if len(svc.Spec.Ports) != 1 {
			t.Errorf("Service %s: %d ports, want 1", svc.Name, len(svc.Spec.Ports))
			continue
		}
		p := svc.Spec.Ports[0]
		if p.Name != "http" || p.Port != c.httpPort || p.TargetPort != intstr.FromString("http") {
			t.Errorf("Service %s: port %s %d -> %s, want http %d -> http", svc.Name, p.Name, p.Port, p.TargetPort.String(), c.httpPort)
		}
	}
}

func checkServiceMonitor(t *testing.T, c chartCase, m *manifests) {
	t.Helper()
	sm := m.serviceMonitors[c.fullname]
	if !c.serviceMonitor {
		return
	}
	if sm == nil {
		t.Fatalf("no ServiceMonitor %s", c.fullname)
	}
	sel := selector(t, &sm.Spec.Selector)
	if !sel.Matches(labels.Set(m.services[c.fullname+"-metrics"].Labels)) {
		t.Errorf("ServiceMonitor selector %v does not match the metrics Service", sel)
	}
	if sel.Matches(labels.Set(m.services[c.fullname+"-headless"].Labels)) {
		t.Errorf("ServiceMonitor selector %v also matches the headless Service (double scrape)", sel)
	}
	if !reflect.DeepEqual(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("ServiceMonitor namespaceSelector %v, want [%s]", sm.Spec.NamespaceSelector.MatchNames, namespace)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor: %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "http" || ep.Path != "/metrics" || ep.Interval != "15s" || ep.ScrapeTimeout != "5s" {
		t.Errorf("ServiceMonitor endpoint %+v, want port http path /metrics interval 15s timeout 5s", ep)
	}
	if sm.Metadata.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v lack metrics.serviceMonitor.labels", sm.Metadata.Labels)
	}
}

func checkPDB(t *testing.T, c chartCase, m *manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	if !c.pdb {
		return
	}
	pdb := m.pdbs[c.fullname]
	if pdb == nil {
		t.Fatalf("no PodDisruptionBudget %s", c.fullname)
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB: maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if !reflect.DeepEqual(pdb.Spec.Selector, sts.Spec.Selector) {
		t.Errorf("PDB selector %v, want the StatefulSet's %v", pdb.Spec.Selector, sts.Spec.Selector)
	}
}

// TestSchemaRejects: values.schema.json and the chart's own checks refuse
// what would otherwise deploy a broken watcher (or two).
func TestSchemaRejects(t *testing.T) {
	needHelm(t)
	for _, set := range []string{
		"replicaCount=2",                              // no such value: one replica, always
		"plenty.pasword=typo",                         // unknown keys are errors, not ignored
		"log.format=xml",                              // enum json|text
		"log.level=trace",                             // enum
		"sweep.badEntries=drop",                       // enum hold|skip
		"sweep.pollInterval=30",                       // a number, not a Go duration
		"sweep.settle=10 s",                           // not a Go duration
		"sweep.startFrom=yesterday",                   // neither RFC 3339 nor a duration
		"sweep.callShare=0",                           // (0, 1]
		"sweep.callShare=1.5",                         // at most 1
		"sweep.itemsPerPage=0",                        // minimum 1
		"publish.subjectPrefix=orders.*",              // wildcards
		"publish.subjectPrefix=orders.",               // empty token
		"stream.name=A.B",                             // not a stream name
		"stream.replicas=7",                           // at most 5
		"http.port=0",                                 // a port
		"persistence.size=lots",                       // a quantity
		"shutdown.terminationGracePeriodSeconds=20",   // must exceed the shutdown timeout (20)
		"shutdown.terminationGracePeriodSeconds=24",   // ... by at least 5 s
		"existingSecret.name=creds,plenty.password=x", // would be ignored silently
		"nats.tls.enabled=true",                       // without a secret
		"podDisruptionBudget.maxUnavailable=2",        // one replica
	} {
		t.Run(set, func(t *testing.T) {
			args := append(renderArgs(""), "--set", set)
			if _, err := runHelm(t, args...); err == nil {
				t.Errorf("helm template --set %s succeeded, want a refusal", set)
			}
		})
	}
	for _, set := range []string{
		"sweep.startFrom=2025-01-01T00:00:00Z",
		"sweep.startFrom=1h30m",
		"sweep.callShare=1",
		"stream.name=",
		"persistence.storageClass=-",
		"shutdown.terminationGracePeriodSeconds=25",
	} {
		t.Run("accepts "+set, func(t *testing.T) {
			args := append(renderArgs(""), "--set", set)
			if _, err := runHelm(t, args...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestNotes renders templates/NOTES.txt (helm template leaves it out) by
// wrapping it into a ConfigMap in a copy of the chart.
func TestNotes(t *testing.T) {
	needHelm(t)
	dir := filepath.Join(t.TempDir(), "orderwatch")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ tpl (.Files.Get \"notes.txt\") . | quote }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(wrapper), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		values      string
		want, never []string
	}{
		{"", []string{
			"NOT CONFIGURED: plenty.url, plenty.username, plenty.password",
			"kubectl -n orderwatch logs -f orderwatch-0",
			"one JSON line per sweep",
			"port-forward svc/orderwatch-metrics 9090:http",
			"curl -fsS http://127.0.0.1:9090/readyz",
			"/metrics | grep '^orderwatch_'",
			"nats sub 'orders.>'",
			"exec orderwatch-0 -c watcher -- /watcher state",
			"helm test orderwatch -n orderwatch",
		}, []string{"WARNING: persistence.enabled=false"}},
		{"testdata/ephemeral-values.yaml", []string{
			"WARNING: persistence.enabled=false",
			"core NATS, at-most-once",
		}, []string{"NOT CONFIGURED"}},
		{"testdata/full-values.yaml", []string{
			"nats sub 'shop.orders.>'",
			"nats stream info SHOP_ORDERS",
			"port-forward svc/orderwatch-metrics 8080:http",
			"ServiceMonitor orderwatch scrapes it every 15s",
		}, []string{"WARNING", "NOT CONFIGURED", "JSON"}},
	} {
		t.Run(caseName(c.values, "default"), func(t *testing.T) {
			args := []string{"template", release, dir, "--namespace", namespace, "--kube-version", kubeVersion, "--show-only", "templates/zz-notes.yaml"}
			if c.values != "" {
				args = append(args, "--values", c.values)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			if err := decodeStrict(out, &cm); err != nil {
				t.Fatal(err)
			}
			text := cm.Data["notes"]
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("NOTES lack %q:\n%s", w, text)
				}
			}
			for _, n := range c.never {
				if strings.Contains(text, n) {
					t.Errorf("NOTES contain %q:\n%s", n, text)
				}
			}
		})
	}
}

// --- helpers ---------------------------------------------------------------

func selector(t *testing.T, ls *metav1.LabelSelector) labels.Selector {
	t.Helper()
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		t.Fatalf("empty label selector")
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func volumesByName(vs []corev1.Volume) map[string]corev1.Volume {
	m := map[string]corev1.Volume{}
	for _, v := range vs {
		m[v.Name] = v
	}
	return m
}

func mountsByPath(ms []corev1.VolumeMount) map[string]corev1.VolumeMount {
	m := map[string]corev1.VolumeMount{}
	for _, mt := range ms {
		m[path.Clean(mt.MountPath)] = mt
	}
	return m
}

func sameResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, q := range x {
			if r, ok := y[k]; !ok || q.Cmp(r) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits) && len(a.Claims) == 0
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *s)
}

func caseName(s, def string) string {
	if s == "" {
		return def
	}
	return filepath.Base(s)
}
