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
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"net/http"
	"net/http/httptest"
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

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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

	// Fleet mode: the shops' state files and the mounted shops Secret.
	fleetStateDir = stateDir + "/shops"
	shopsDir      = "/etc/orderwatch/shops"
)

// requiredValues holds the values the schema requires (plenty.url,
// .username, .password): "the chart's defaults" are these on top of
// values.yaml, as check.sh renders them.
const requiredValues = "testdata/required-values.yaml"

// renderArgs renders with valuesFile, or with the defaults ("").
func renderArgs(valuesFile string) []string {
	if valuesFile == "" {
		valuesFile = requiredValues
	}
	return []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion, "--values", valuesFile}
}

// chartCase is one rendering of the chart and what it must contain.
type chartCase struct {
	name   string // rendered file <name>.yaml
	values string // values file relative to deploy/helm; "" = the chart's defaults (plus requiredValues)

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

	goMemLimit      bool     // GOMEMLIMIT from the container's memory limit
	extraVolumes    []string // names of extraVolumes, each mounted in the watcher
	initContainers  []string // names
	retentionPolicy appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy
	testImage       string
	dashboards      bool
	dashboardNS     string
	dashboardLabels map[string]string
	prometheusRule  bool
	runbookBase     string
	ruleLabels      map[string]string // additionalRuleLabels
	disabledAlerts  []string
	outboxMax       string
	networkPolicy   bool                             // the NetworkPolicy is rendered
	networkFrom     []networkingv1.NetworkPolicyPeer // networkPolicy.from: the peers besides the helm test pod

	// Fleet mode (fleet.enabled): WATCHER_SHOPS_FILE from the Secret
	// shopsSecret (rendered by the chart when shopsChartSecret), replicas
	// members (0 = 1: single-shop mode's default).
	fleet            bool
	replicas         int32
	shopsSecret      string
	shopsKey         string
	shopsChartSecret bool
	stateSizeLimit   string // the emptyDir's sizeLimit ("" = no limit checked)
}

// wantReplicas is the StatefulSet's replicas the case must render.
func (c chartCase) wantReplicas() int32 { return max(c.replicas, 1) }

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
			"WATCHER_PLENTY_URL":       "https://shop.example",
			"WATCHER_KEYSET":           "auto", // the binary's default: one-second bulks handled
			"WATCHER_STATE_PATH":       statePath,
			"WATCHER_HTTP_ADDR":        ":9090",
			"WATCHER_SHUTDOWN_TIMEOUT": "20s",
			"WATCHER_STREAM":           "ORDERS",
			"WATCHER_NATS_URL":         "nats://nats:4222",
			"WATCHER_LOG_FORMAT":       "json",
			"WATCHER_OUTBOX_MAX":       "100000",
			"WATCHER_CALL_SHARE":       "0.25",
			// a stream that does not grow forever: 7 days, 1 GiB
			"WATCHER_STREAM_MAX_AGE":   "168h",
			"WATCHER_STREAM_MAX_BYTES": "1073741824",
		},
		// unset timings: derived by the binary (the budget, late arrivals)
		configAbsent: []string{"WATCHER_NATS_USER", "WATCHER_SOURCE", "WATCHER_SCOPE", "WATCHER_SCOPE_JSON", "WATCHER_WITH",
			"WATCHER_POLL_INTERVAL", "WATCHER_SETTLE", "WATCHER_OVERLAP"},
		goMemLimit:      true,
		retentionPolicy: appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Retain", WhenScaled: "Retain"},
		testImage:       "curlimages/curl:8.11.1",
		networkPolicy:   true,
		networkFrom:     defaultNetworkFrom, // kube-prometheus-stack's Prometheus in "monitoring"
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
			"WATCHER_KEYSET":           "true",
		},
		everyVariableSet: true,
		goMemLimit:       true,
		extraVolumes:     []string{"ca-bundle"},
		initContainers:   []string{"restore-state"},
		retentionPolicy:  appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Delete", WhenScaled: "Retain"},
		testImage:        "registry.example/curl@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
		dashboards:       true,
		dashboardNS:      "monitoring",
		dashboardLabels:  map[string]string{"grafana_dashboard": "orderwatch"},
		prometheusRule:   true,
		runbookBase:      "https://wiki.example/ops/orderwatch-runbook",
		ruleLabels:       map[string]string{"team": "fulfilment", "severity": "page"},
		disabledAlerts:   []string{"OrderwatchClockProblem"},
		outboxMax:        "1000000",
		networkPolicy:    true,
		networkFrom: []networkingv1.NetworkPolicyPeer{
			{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "observability"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "vmagent"}},
			},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}},
		},
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
		goMemLimit:      true,
		retentionPolicy: appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Retain", WhenScaled: "Retain"},
		testImage:       "curlimages/curl:8.11.1",
	},
	fleetCase(chartCase{
		// Fleet mode with the chart's own shops Secret (dev) and a NATS
		// password: the chart's Secret holds that one only.
		name:             "fleet",
		values:           "testdata/fleet-values.yaml",
		resources:        rr("50m", "64Mi", "256Mi"),
		chartSecret:      true,
		secretName:       "orderwatch",
		natsPasswordKey:  "nats-password",
		shopsChartSecret: true,
		configExact: map[string]string{
			"WATCHER_STREAM": "ORDERS",
			"WATCHER_LEASE":  "true",
		},
		configAbsent:     []string{"WATCHER_SHOP_ID"},
		everyVariableSet: true, // with full: every variable is set by one of them
	}),
	fleetCase(chartCase{
		// The chart README's production example: the registry in a Secret
		// of its own, NATS credentials in an existing Secret.
		name:            "fleet-example",
		values:          "orderwatch/examples/fleet-values.yaml",
		resources:       rr("500m", "384Mi", "768Mi"),
		secretName:      "orderwatch-nats",
		natsPasswordKey: "nats-password",
		serviceMonitor:  true,
		configExact: map[string]string{
			"WATCHER_NATS_URL":        "nats://nats.nats.svc:4222",
			"WATCHER_NATS_USER":       "orderwatch",
			"WATCHER_STREAM_REPLICAS": "3",
		},
		dashboards:      true,
		dashboardLabels: map[string]string{"grafana_dashboard": "1"},
		ruleLabels:      map[string]string{},
	}),
}

// fleetCase completes a fleet mode case with what every fleet rendering
// here shares: the chart's default names, image, port and grace, 3 members
// with an emptyDir state, the shops Secret orderwatch-shops mounted whole,
// the registry and state directory variables (and not the single shop's),
// a PDB, the default NetworkPolicy and the PrometheusRule.
func fleetCase(c chartCase) chartCase {
	c.fullname, c.image, c.serviceAccount, c.httpPort, c.grace = "orderwatch", "ghcr.io/orderwatch/orderwatch:0.1.0", "orderwatch", 9090, 30
	c.fleet, c.replicas, c.shopsSecret, c.shopsKey, c.stateSizeLimit = true, 3, "orderwatch-shops", "shops.json", "4Gi"
	c.persistence = false // an emptyDir: a shop's state moves through NATS
	c.configExact["WATCHER_SHOPS_FILE"] = shopsDir + "/shops.json"
	c.configExact["WATCHER_STATE_DIR"] = fleetStateDir
	// the single shop's settings are the registry's entries now
	c.configAbsent = append(c.configAbsent, "WATCHER_PLENTY_URL", "WATCHER_PLENTY_USERNAME", "WATCHER_STATE_PATH")
	c.goMemLimit, c.pdb, c.networkPolicy, c.networkFrom = true, true, true, defaultNetworkFrom
	c.retentionPolicy = appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Retain", WhenScaled: "Retain"}
	c.testImage = "curlimages/curl:8.11.1"
	c.prometheusRule, c.runbookBase, c.outboxMax = true, defaultRunbookBase, "100000"
	return c
}

// defaultNetworkFrom is networkPolicy.from of values.yaml: kube-prometheus-
// stack's Prometheus in "monitoring".
var defaultNetworkFrom = []networkingv1.NetworkPolicyPeer{{
	NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
	PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
}}

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
	networkPolicies map[string]*networkingv1.NetworkPolicy
	serviceMonitors map[string]*serviceMonitor
	prometheusRules map[string]*monitoringv1.PrometheusRule
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
		networkPolicies: map[string]*networkingv1.NetworkPolicy{},
		serviceMonitors: map[string]*serviceMonitor{},
		prometheusRules: map[string]*monitoringv1.PrometheusRule{},
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
		case "networking.k8s.io/v1 NetworkPolicy":
			var v *networkingv1.NetworkPolicy
			if v, derr = decodeInto(m.networkPolicies, []byte(doc), func(o *networkingv1.NetworkPolicy) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
			}
		case "monitoring.coreos.com/v1 ServiceMonitor":
			var v *serviceMonitor
			if v, derr = decodeInto(m.serviceMonitors, []byte(doc), func(o *serviceMonitor) *metav1.ObjectMeta { return &o.Metadata }); v != nil {
				meta = &v.Metadata
			}
		case "monitoring.coreos.com/v1 PrometheusRule":
			// The Prometheus Operator's own Go types: an unknown field fails.
			var v *monitoringv1.PrometheusRule
			if v, derr = decodeInto(m.prometheusRules, []byte(doc), func(o *monitoringv1.PrometheusRule) *metav1.ObjectMeta { return &o.ObjectMeta }); v != nil {
				meta = &v.ObjectMeta
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
	everySet := map[string]bool{} // by the cases with everyVariableSet
	var everyCases []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := render(t, c)
			checkObjects(t, c, m)
			sts := checkStatefulSet(t, c, m)
			cm := checkConfigMap(t, c, m, allowed)
			watcher := sts.Spec.Template.Spec.Containers[0]
			checkSecretFiles(t, c, m, "StatefulSet", &sts.Spec.Template.Spec, watcher)
			checkShopsSecret(t, c, m, &sts.Spec.Template.Spec, watcher, cm)
			checkTestPod(t, c, m, sts)
			set := checkEnvNames(t, c, cm, allowed, sts.Spec.Template.Spec, m.pods[c.fullname+"-test"].Spec)
			if c.everyVariableSet {
				everyCases = append(everyCases, c.values)
				for k := range set {
					everySet[k] = true
				}
			}
			checkServices(t, c, m, sts)
			checkServiceMonitor(t, c, m)
			checkPDB(t, c, m, sts)
			checkNetworkPolicy(t, c, m, sts)
			checkDashboard(t, c, m)
			checkPrometheusRule(t, c, m)
		})
	}
	// Single-shop and fleet mode set different variables (WATCHER_PLENTY_URL
	// or WATCHER_SHOPS_FILE): every variable must be set by one of the
	// cases that turn every option on.
	if len(everyCases) > 0 {
		var missing []string
		for k := range allowed {
			if !everySet[k] && !slices.Contains(plainSecrets, k) {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%v turn every option on, yet these variables are never set: %v (a chart value is missing)", everyCases, missing)
		}
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
		"Pod":         {c.fullname + "-test"},
	}
	if c.dashboards {
		want["ConfigMap"] = append(want["ConfigMap"], c.fullname+"-dashboard")
	}
	if c.prometheusRule {
		want["PrometheusRule"] = []string{c.fullname}
	}
	if c.chartSecret {
		want["Secret"] = []string{c.fullname}
	}
	if c.shopsChartSecret {
		want["Secret"] = append(want["Secret"], c.shopsSecret)
	}
	want["ServiceAccount"] = []string{c.serviceAccount}
	if c.pdb {
		want["PodDisruptionBudget"] = []string{c.fullname}
	}
	if c.serviceMonitor {
		want["ServiceMonitor"] = []string{c.fullname}
	}
	if c.networkPolicy {
		want["NetworkPolicy"] = []string{c.fullname}
	}
	got := map[string][]string{}
	for _, o := range m.metas {
		got[o.kind] = append(got[o.kind], o.meta.Name)
		ns := namespace
		if o.kind == "ConfigMap" && o.meta.Name == c.fullname+"-dashboard" && c.dashboardNS != "" {
			ns = c.dashboardNS // where Grafana's sidecar looks
		}
		if o.meta.Namespace != ns {
			t.Errorf("%s %s: namespace %q, want %q", o.kind, o.meta.Name, o.meta.Namespace, ns)
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
	if s.Replicas == nil || *s.Replicas != c.wantReplicas() {
		t.Errorf("replicas = %s, want %d (single-shop: 1 by default, replicaCount: 2 adds a hot standby, see TestValueVariants; fleet: fleet.replicas)", js(s.Replicas), c.wantReplicas())
	}
	if c.fleet {
		// The members start together; OrderedReady would start one that
		// takes every shop and then hands most of them over.
		if s.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("fleet: podManagementPolicy %q, want Parallel", s.PodManagementPolicy)
		}
	} else if s.PodManagementPolicy != "" && s.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
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
		} else if c.stateSizeLimit != "" && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse(c.stateSizeLimit)) != 0) {
			t.Errorf("state emptyDir sizeLimit %v, want %s", v.EmptyDir.SizeLimit, c.stateSizeLimit)
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
	if len(pod.Containers) != 1 {
		t.Fatalf("want exactly the watcher container, got %d containers", len(pod.Containers))
	}
	var inits []string
	for _, ic := range pod.InitContainers {
		inits = append(inits, ic.Name)
	}
	if !reflect.DeepEqual(inits, c.initContainers) {
		t.Errorf("init containers %v, want %v", inits, c.initContainers)
	}
	if got := s.PersistentVolumeClaimRetentionPolicy; got == nil || *got != c.retentionPolicy {
		t.Errorf("persistentVolumeClaimRetentionPolicy %s, want %s", js(got), js(c.retentionPolicy))
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
	for _, name := range c.extraVolumes {
		if _, ok := vols[name]; !ok {
			t.Errorf("extra volume %s missing", name)
		}
		mounted := false
		for _, mt := range w.VolumeMounts {
			mounted = mounted || mt.Name == name
		}
		if !mounted {
			t.Errorf("extra volume %s not mounted in the watcher", name)
		}
	}

	// GOMEMLIMIT: the memory limit in bytes (no divisor: Go reads a bare number as bytes).
	var gml *corev1.EnvVar
	for i, e := range w.Env {
		if e.Name == "GOMEMLIMIT" {
			gml = &w.Env[i]
		}
	}
	if c.goMemLimit {
		want := &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "watcher", Resource: "limits.memory"}}
		if gml == nil || gml.Value != "" || !reflect.DeepEqual(gml.ValueFrom, want) {
			t.Errorf("GOMEMLIMIT %s, want from %s", js(gml), js(want))
		}
	} else if gml != nil && gml.ValueFrom != nil {
		t.Errorf("GOMEMLIMIT from %s, want none from the limit", js(gml.ValueFrom))
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
	for _, ctr := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
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
	stateVar := "WATCHER_STATE_PATH"
	if c.fleet {
		stateVar = "WATCHER_STATE_DIR"
	}
	if !strings.HasPrefix(cm.Data[stateVar], stateDir+"/") {
		t.Errorf("%s %q is not on the state volume %s", stateVar, cm.Data[stateVar], stateDir)
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
	want := map[string]ref{}
	if !c.fleet { // fleet mode: the shops' passwords are files of the shops Secret
		want["WATCHER_PLENTY_PASSWORD_FILE"] = ref{c.secretName, c.plentyKey}
	}
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

// checkShopsSecret: in fleet mode the registry reaches the members as the
// whole shops Secret mounted read-only at shopsDir (no items, no subPath:
// the kubelet then updates the files when the Secret changes, and every
// key is a password file an entry can name); the chart's own Secret (dev)
// holds a registry the binary accepts, with a key for every passwordFile.
// Single-shop mode mounts no such Secret.
func checkShopsSecret(t *testing.T, c chartCase, m *manifests, pod *corev1.PodSpec, ctr corev1.Container, cm *corev1.ConfigMap) {
	t.Helper()
	vol, hasVol := volumesByName(pod.Volumes)["shops"]
	if !c.fleet {
		if hasVol || cm.Data["WATCHER_SHOPS_FILE"] != "" || cm.Data["WATCHER_STATE_DIR"] != "" {
			t.Errorf("single-shop mode: shops volume %v, WATCHER_SHOPS_FILE %q, WATCHER_STATE_DIR %q, want none", hasVol,
				cm.Data["WATCHER_SHOPS_FILE"], cm.Data["WATCHER_STATE_DIR"])
		}
		return
	}
	if want := shopsDir + "/" + c.shopsKey; cm.Data["WATCHER_SHOPS_FILE"] != want {
		t.Errorf("WATCHER_SHOPS_FILE %q, want %q", cm.Data["WATCHER_SHOPS_FILE"], want)
	}
	if cm.Data["WATCHER_STATE_DIR"] != fleetStateDir {
		t.Errorf("WATCHER_STATE_DIR %q, want %q (on the state volume)", cm.Data["WATCHER_STATE_DIR"], fleetStateDir)
	}
	if !hasVol || vol.Secret == nil || vol.Secret.SecretName != c.shopsSecret || len(vol.Secret.Items) != 0 {
		t.Errorf("volume shops %s, want the whole Secret %s (no items)", js(vol), c.shopsSecret)
	}
	mt, ok := mountsByPath(ctr.VolumeMounts)[shopsDir]
	if !ok || mt.Name != "shops" || !mt.ReadOnly || mt.SubPath != "" {
		t.Errorf("mount at %s %s, want the volume shops, read-only, without subPath (a subPath is never updated)", shopsDir, js(mt))
	}
	sec := m.secrets[c.shopsSecret]
	if !c.shopsChartSecret {
		if sec != nil {
			t.Errorf("the chart renders the shops Secret %s, want it to use the existing one", c.shopsSecret)
		}
		return
	}
	if sec == nil {
		t.Fatalf("no shops Secret %s", c.shopsSecret)
	}
	var reg struct {
		Shops []map[string]any `json:"shops"`
	}
	dec := json.NewDecoder(bytes.NewReader(sec.Data[c.shopsKey]))
	if err := dec.Decode(&reg); err != nil || len(reg.Shops) == 0 {
		t.Fatalf("shops Secret: %s is not a registry {\"shops\": [...]}: %v\n%s", c.shopsKey, err, sec.Data[c.shopsKey])
	}
	for i, e := range reg.Shops {
		if _, ok := e["password"]; ok {
			t.Errorf("registry entry %d holds a password (the binary refuses it)", i)
		}
		pf, _ := e["passwordFile"].(string)
		pe, _ := e["passwordEnv"].(string)
		if (pf == "") == (pe == "") {
			t.Errorf("registry entry %d: want exactly one of passwordFile, passwordEnv: %v", i, e)
		}
		if pf != "" {
			if path.Dir(pf) != shopsDir {
				t.Errorf("registry entry %d: passwordFile %s is not in the mounted Secret %s", i, pf, shopsDir)
			} else if _, ok := sec.Data[path.Base(pf)]; !ok {
				t.Errorf("registry entry %d: passwordFile %s: the shops Secret has no key %s", i, pf, path.Base(pf))
			}
		}
	}
}

func checkTestPod(t *testing.T, c chartCase, m *manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	p := m.pods[c.fullname+"-test"]
	if p == nil {
		t.Fatalf("no helm test pod %s-test", c.fullname)
	}
	if p.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("test pod: helm.sh/hook %q, want test", p.Annotations["helm.sh/hook"])
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("test pod: restartPolicy %q, want Never", p.Spec.RestartPolicy)
	}
	checkPodCommon(t, c, "test pod", p.Spec)
	if len(p.Spec.Containers) != 1 || len(p.Spec.InitContainers) != 0 {
		t.Fatalf("test pod: %d containers, %d init, want 1", len(p.Spec.Containers), len(p.Spec.InitContainers))
	}
	ctr := p.Spec.Containers[0]
	if ctr.Image != c.testImage {
		t.Errorf("test pod: image %q, want %q", ctr.Image, c.testImage)
	}
	if !reflect.DeepEqual(ctr.SecurityContext, wantContainerSecurity) {
		t.Errorf("test pod: container securityContext\n got %s\nwant %s", js(ctr.SecurityContext), js(wantContainerSecurity))
	}
	if ctr.Resources.Limits.Memory().IsZero() {
		t.Errorf("test pod: no memory limit")
	}
	// It never logs in: no watcher (check would log in), no configuration,
	// no Secret, no state; only HTTP to the running release.
	if len(p.Spec.Volumes) != 0 || len(ctr.VolumeMounts) != 0 || len(ctr.EnvFrom) != 0 {
		t.Errorf("test pod: volumes %s mounts %s envFrom %s, want none (no Secret, no state, no config)",
			js(p.Spec.Volumes), js(ctr.VolumeMounts), js(ctr.EnvFrom))
	}
	for _, e := range ctr.Env {
		if strings.HasPrefix(e.Name, "WATCHER_") || e.ValueFrom != nil {
			t.Errorf("test pod: env %s, want no watcher configuration", js(e))
		}
	}
	if ctr.Image == c.image || slices.Contains(ctr.Args, "check") {
		t.Errorf("test pod runs the watcher (%s %v): watcher check would log in", ctr.Image, ctr.Args)
	}
	script := strings.Join(append(slices.Clone(ctr.Command), ctr.Args...), " ")
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	// Every pod, by its own DNS name under the headless Service (a Service
	// would answer from one pod of its choice: the standby or the active).
	var urls []string
	for i := range int(*sts.Spec.Replicas) {
		urls = append(urls, fmt.Sprintf("http://%s-%d.%s.%s.svc:%d", c.fullname, i, sts.Spec.ServiceName, namespace, c.httpPort))
	}
	if got := strings.Fields(env["ORDERWATCH_URLS"]); !slices.Equal(got, urls) {
		t.Errorf("test pod: ORDERWATCH_URLS %q, want every pod through the headless Service %q", got, urls)
	}
	if h := m.services[sts.Spec.ServiceName]; h == nil || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("test pod: the headless Service %s must publish the DNS names of unready pods (the test reports why they are not ready)", sts.Spec.ServiceName)
	}
	cm := m.configMaps[c.fullname]
	lease := cm != nil && cm.Data["WATCHER_LEASE"] == "true" && cm.Data["WATCHER_STREAM"] != "" && !c.fleet
	if env["ORDERWATCH_LEASE"] != fmt.Sprint(lease) {
		t.Errorf("test pod: ORDERWATCH_LEASE %q, want %v (one pod holds the lease: WATCHER_LEASE and a stream, not fleet mode)", env["ORDERWATCH_LEASE"], lease)
	}
	if env["ORDERWATCH_FLEET"] != fmt.Sprint(c.fleet) {
		t.Errorf("test pod: ORDERWATCH_FLEET %q, want %v", env["ORDERWATCH_FLEET"], c.fleet)
	}
	for _, want := range []string{`"$base/readyz"`, `"$base/metrics"`, "orderwatch_leader", "standby: caught up", "orderwatch_nats_connected 1", "orderwatch_state_writable 1", `exit "$fail"`} {
		if !strings.Contains(script, want) {
			t.Errorf("test pod: the script lacks %q:\n%s", want, script)
		}
	}
	// The watcher's selectors (StatefulSet, Services, PDB) must not pick it up.
	if selector(t, sts.Spec.Selector).Matches(labels.Set(p.Labels)) {
		t.Errorf("the StatefulSet selector matches the test pod's labels %v", p.Labels)
	}
}

// checkEnvNames: every WATCHER_* name the chart sets is one `watcher help`
// lists; no name is set twice. It returns the names set (TestChart checks
// that the cases with every option on set every variable between them).
func checkEnvNames(t *testing.T, c chartCase, cm *corev1.ConfigMap, allowed map[string]bool, pods ...corev1.PodSpec) map[string]string {
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
	return set
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

// checkNetworkPolicy: the watcher pod (and only it) admits ingress on the
// HTTP port only, from the helm test pod and networkPolicy.from; egress is
// left alone (the shop, NATS, DNS).
func checkNetworkPolicy(t *testing.T, c chartCase, m *manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	np := m.networkPolicies[c.fullname]
	if !renderedIff(t, c.networkPolicy, np, "NetworkPolicy "+c.fullname) {
		return
	}
	sel := selector(t, &np.Spec.PodSelector)
	if !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy: podSelector %v does not select the watcher pod %v", sel, sts.Spec.Template.Labels)
	}
	test := m.pods[c.fullname+"-test"]
	if sel.Matches(labels.Set(test.Labels)) {
		t.Errorf("NetworkPolicy: podSelector %v also selects the helm test pod", sel)
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Egress) != 0 {
		t.Errorf("NetworkPolicy: policyTypes %v egress %s, want Ingress only (egress open)", np.Spec.PolicyTypes, js(np.Spec.Egress))
	}
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("NetworkPolicy: %d ingress rules, want 1", len(np.Spec.Ingress))
	}
	rule := np.Spec.Ingress[0]
	tcp := corev1.ProtocolTCP
	wantPorts := []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(c.httpPort))}}
	if !reflect.DeepEqual(rule.Ports, wantPorts) {
		t.Errorf("NetworkPolicy: ports %s, want only the HTTP port %d/TCP", js(rule.Ports), c.httpPort)
	}
	if len(rule.From) == 0 {
		t.Fatalf("NetworkPolicy: no from: every source would be admitted")
	}
	// The first peer is the helm test pod of this release, in the release's
	// namespace (no namespaceSelector); the rest is networkPolicy.from.
	first := rule.From[0]
	if first.NamespaceSelector != nil || first.IPBlock != nil || first.PodSelector == nil ||
		!selector(t, first.PodSelector).Matches(labels.Set(test.Labels)) {
		t.Errorf("NetworkPolicy: first peer %s, want the helm test pod %v", js(first), test.Labels)
	} else if selector(t, first.PodSelector).Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy: the test pod's peer %s also matches the watcher pod", js(first))
	}
	if got := rule.From[1:]; !reflect.DeepEqual(got, c.networkFrom) {
		t.Errorf("NetworkPolicy: peers\n got %s\nwant %s (networkPolicy.from)", js(got), js(c.networkFrom))
	}
}

// The chart's single copies of the dashboard and the alerting rules, and the
// runbook the alerts link to.
const (
	dashboardFile      = chartDir + "/files/dashboard.json"
	alertsFile         = chartDir + "/files/alerts.yaml"
	runbookFile        = "../../docs/runbook.md"
	defaultRunbookBase = "https://github.com/orderwatch/orderwatch/blob/main/docs/runbook.md"
)

// renderedIff: an optional object is rendered exactly when it is turned on.
// It reports whether there is an object to check further.
func renderedIff[T any](t *testing.T, on bool, v *T, what string) bool {
	t.Helper()
	switch {
	case !on && v != nil:
		t.Errorf("%s rendered, want it off by default", what)
	case on && v == nil:
		t.Fatalf("no %s", what)
	}
	return on
}

func checkDashboard(t *testing.T, c chartCase, m *manifests) {
	t.Helper()
	cm := m.configMaps[c.fullname+"-dashboard"]
	if !renderedIff(t, c.dashboards, cm, "dashboard ConfigMap "+c.fullname+"-dashboard") {
		return
	}
	for k, v := range c.dashboardLabels {
		if cm.Labels[k] != v {
			t.Errorf("dashboard ConfigMap: label %s=%q, want %q (Grafana's sidecar selects by it)", k, cm.Labels[k], v)
		}
	}
	file, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 1 {
		t.Errorf("dashboard ConfigMap: %d keys, want one", len(cm.Data))
	}
	got := cm.Data["orderwatch.json"]
	if got != strings.TrimSuffix(string(file), "\n") {
		t.Errorf("dashboard ConfigMap: orderwatch.json differs from %s (it must be the file as it is)", dashboardFile)
	}
	var dash struct {
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal([]byte(got), &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
		t.Errorf("dashboard: not a Grafana dashboard (uid %q, %d panels): %v", dash.UID, len(dash.Panels), err)
	}
}

// ruleFile is a Prometheus rule file, decoded with the Operator's group type.
type ruleFile struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

func loadAlertsFile(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := decodeStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return f
}

func checkPrometheusRule(t *testing.T, c chartCase, m *manifests) {
	t.Helper()
	pr := m.prometheusRules[c.fullname]
	if !renderedIff(t, c.prometheusRule, pr, "PrometheusRule "+c.fullname) {
		return
	}
	if pr.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v lack prometheusRule.labels", pr.Labels)
	}
	// What the chart must make of the file: the same groups and rules, minus
	// the disabled ones, with the runbook base, the extra labels (an alert's
	// own labels win) and publish.outboxMax.
	want := loadAlertsFile(t)
	var groups []monitoringv1.RuleGroup
	for _, g := range want.Groups {
		var rules []monitoringv1.Rule
		for _, r := range g.Rules {
			if slices.Contains(c.disabledAlerts, r.Alert) {
				continue
			}
			r.Annotations["runbook_url"] = strings.Replace(r.Annotations["runbook_url"], defaultRunbookBase, c.runbookBase, 1)
			labels := map[string]string{}
			for k, v := range c.ruleLabels {
				labels[k] = v
			}
			for k, v := range r.Labels {
				labels[k] = v
			}
			r.Labels = labels
			if r.Alert == "OrderwatchOutboxFull" {
				r.Expr = intstr.FromString(strings.Replace(r.Expr.String(), ">= 100000", ">= "+c.outboxMax, 1))
			}
			if r.Alert == "OrderwatchFleetMembersMissing" {
				r.Expr = intstr.FromString(strings.Replace(r.Expr.String(), "< 3", fmt.Sprintf("< %d", c.wantReplicas()), 1))
			}
			rules = append(rules, r)
		}
		g.Rules = rules
		groups = append(groups, g)
	}
	if !reflect.DeepEqual(pr.Spec.Groups, groups) {
		t.Errorf("PrometheusRule groups differ from %s as the chart should change it:\n got %s\nwant %s", alertsFile, js(pr.Spec.Groups), js(groups))
	}
	n := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			n++
			if slices.Contains(c.disabledAlerts, r.Alert) {
				t.Errorf("disabled alert %s rendered", r.Alert)
			}
			if !strings.HasPrefix(r.Annotations["runbook_url"], c.runbookBase+"#") {
				t.Errorf("%s: runbook_url %q not under %s", r.Alert, r.Annotations["runbook_url"], c.runbookBase)
			}
			if r.Alert == "OrderwatchOutboxFull" && !strings.Contains(r.Expr.String(), ">= "+c.outboxMax) {
				t.Errorf("OrderwatchOutboxFull: %q does not compare with publish.outboxMax %s", r.Expr.String(), c.outboxMax)
			}
		}
	}
	if n == 0 {
		t.Errorf("PrometheusRule without rules")
	}
}

// TestAlertsFile: every rule of files/alerts.yaml is an alert a person can
// act on: a severity, a summary, a description and a runbook_url whose anchor
// is a section of docs/runbook.md (and every alert section there has its alert).
func TestAlertsFile(t *testing.T) {
	f := loadAlertsFile(t)
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	// GitHub's anchors of "## Heading": lower case, spaces to dashes.
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(m[1])), " ", "-")] = true
	}
	alerts := map[string]bool{} // by anchor
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule %q; the file holds alerts only", g.Name, r.Record)
				continue
			}
			anchor := strings.ToLower(r.Alert)
			if alerts[anchor] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts[anchor] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, k := range []string{"summary", "description"} {
				if r.Annotations[k] == "" {
					t.Errorf("%s: no %s", r.Alert, k)
				}
			}
			if want := defaultRunbookBase + "#" + anchor; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !anchors[anchor] {
				t.Errorf("%s: %s has no section \"## %s\"", r.Alert, runbookFile, r.Alert)
			}
		}
	}
	if len(alerts) < 10 {
		t.Errorf("%d alerts, want the full set", len(alerts))
	}
	for a := range anchors {
		if strings.HasPrefix(a, "orderwatch") && !alerts[a] {
			t.Errorf("%s: section %q belongs to no alert", runbookFile, a)
		}
	}
}

// TestValueVariants renders the chart with single values changed and checks
// what they must do.
func TestValueVariants(t *testing.T) {
	needHelm(t)
	render := func(t *testing.T, set ...string) (*manifests, *appsv1.StatefulSet, corev1.Container) {
		t.Helper()
		args := renderArgs("")
		for _, s := range set {
			args = append(args, "--set-json", s)
		}
		out, err := runHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		m := parseManifests(t, out)
		sts := m.statefulSets[release]
		if sts == nil {
			t.Fatalf("no StatefulSet")
		}
		return m, sts, sts.Spec.Template.Spec.Containers[0]
	}
	gomemlimit := func(t *testing.T, ctr corev1.Container) *corev1.EnvVar {
		var found *corev1.EnvVar
		for i, e := range ctr.Env {
			if e.Name == "GOMEMLIMIT" {
				if found != nil {
					t.Errorf("GOMEMLIMIT set twice")
				}
				found = &ctr.Env[i]
			}
		}
		return found
	}
	t.Run("GOMEMLIMIT in extraEnv wins", func(t *testing.T) {
		_, _, ctr := render(t, `extraEnv=[{"name":"GOMEMLIMIT","value":"200MiB"}]`)
		if e := gomemlimit(t, ctr); e == nil || e.Value != "200MiB" || e.ValueFrom != nil {
			t.Errorf("GOMEMLIMIT %s, want 200MiB from extraEnv only", js(e))
		}
	})
	t.Run("no memory limit, no GOMEMLIMIT", func(t *testing.T) {
		_, _, ctr := render(t, `resources.limits=null`)
		if e := gomemlimit(t, ctr); e != nil {
			t.Errorf("GOMEMLIMIT %s without a memory limit (it would be the node's memory)", js(e))
		}
	})
	t.Run("goMemLimit off", func(t *testing.T) {
		_, _, ctr := render(t, `goMemLimit={"fromMemoryLimit":false}`)
		if e := gomemlimit(t, ctr); e != nil {
			t.Errorf("GOMEMLIMIT %s with goMemLimit.fromMemoryLimit=false", js(e))
		}
	})
	t.Run("existingClaim", func(t *testing.T) {
		_, sts, ctr := render(t, `persistence.existingClaim="orderwatch-state-restored"`)
		if n := len(sts.Spec.VolumeClaimTemplates); n != 0 {
			t.Errorf("%d claim templates with existingClaim, want 0", n)
		}
		v, ok := volumesByName(sts.Spec.Template.Spec.Volumes)["state"]
		if !ok || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "orderwatch-state-restored" || v.PersistentVolumeClaim.ReadOnly {
			t.Errorf("volume state %s, want the claim orderwatch-state-restored, writable", js(v))
		}
		if mt, ok := mountsByPath(ctr.VolumeMounts)[stateDir]; !ok || mt.Name != "state" {
			t.Errorf("state not mounted at %s", stateDir)
		}
	})
	t.Run("hot standby: two replicas", func(t *testing.T) {
		m, sts, ctr := render(t, `replicaCount=2`)
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 2 {
			t.Errorf("replicas %s, want 2", js(sts.Spec.Replicas))
		}
		// By default the scheduler must put the two on different nodes: a
		// preference would let both land on one, and that node's failure
		// would take the active and its standby together.
		aff := sts.Spec.Template.Spec.Affinity
		if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
			len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 ||
			aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" ||
			!selector(t, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector).Matches(labels.Set(sts.Spec.Template.Labels)) {
			t.Errorf("affinity %s, want a required anti-affinity of the watcher pods per node by default", js(aff))
		}
		if pdb := m.pdbs[release]; pdb == nil || pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
			t.Errorf("PDB %s, want maxUnavailable 1 with two replicas", js(pdb))
		}
		var id *corev1.EnvVar
		for i, e := range ctr.Env {
			if e.Name == "WATCHER_INSTANCE_ID" {
				id = &ctr.Env[i]
			}
		}
		if id == nil || id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("WATCHER_INSTANCE_ID %s, want the pod name", js(id))
		}
		// helm test checks both pods, not one the metrics Service picks.
		var urls string
		if p := m.pods[release+"-test"]; p != nil {
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "ORDERWATCH_URLS" {
					urls = e.Value
				}
			}
		}
		if want := "http://orderwatch-0.orderwatch-headless.orderwatch.svc:9090 http://orderwatch-1.orderwatch-headless.orderwatch.svc:9090"; urls != want {
			t.Errorf("helm test pod: ORDERWATCH_URLS %q, want %q", urls, want)
		}
		_, sts, _ = render(t, `replicaCount=2`, `standby.podAntiAffinity="soft"`)
		if aff := sts.Spec.Template.Spec.Affinity; aff == nil || aff.PodAntiAffinity == nil ||
			len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 ||
			len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
			aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" ||
			!selector(t, aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector).Matches(labels.Set(sts.Spec.Template.Labels)) {
			t.Errorf("standby.podAntiAffinity=soft: %s, want a preferred anti-affinity per node only", js(aff))
		}
		_, sts, _ = render(t, `replicaCount=2`, `standby.podAntiAffinity="none"`)
		if aff := sts.Spec.Template.Spec.Affinity; aff != nil {
			t.Errorf("standby.podAntiAffinity=none: affinity %s, want none", js(aff))
		}
		_, sts, _ = render(t, `replicaCount=1`, `standby.podAntiAffinity="hard"`)
		if aff := sts.Spec.Template.Spec.Affinity; aff != nil {
			t.Errorf("one replica: affinity %s, want none (nothing to keep apart)", js(aff))
		}
		_, sts, _ = render(t, `replicaCount=2`, `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}}`)
		if aff := sts.Spec.Template.Spec.Affinity; aff == nil || aff.PodAntiAffinity != nil || aff.NodeAffinity == nil {
			t.Errorf("an explicit affinity must win: %s", js(aff))
		}
	})
	t.Run("every alert but one disabled", func(t *testing.T) {
		var names []string
		for _, g := range loadAlertsFile(t).Groups {
			for _, r := range g.Rules {
				if r.Alert != "OrderwatchStateNotWritable" {
					names = append(names, r.Alert)
				}
			}
		}
		m, _, _ := render(t, `prometheusRule={"enabled":true,"labels":{},"runbookBaseURL":"https://x.example/rb","additionalRuleLabels":{},"disabledAlerts":`+js(names)+`}`)
		pr := m.prometheusRules[release]
		if pr == nil || len(pr.Spec.Groups) != 1 || len(pr.Spec.Groups[0].Rules) != 1 || pr.Spec.Groups[0].Rules[0].Alert != "OrderwatchStateNotWritable" {
			t.Fatalf("PrometheusRule %s, want only OrderwatchStateNotWritable", js(pr))
		}
		if got := pr.Spec.Groups[0].Rules[0].Annotations["runbook_url"]; got != "https://x.example/rb#orderwatchstatenotwritable" {
			t.Errorf("runbook_url %q", got)
		}
	})
}

// TestSchemaRejects: values.schema.json and the chart's own checks refuse
// what would otherwise deploy a broken watcher (or two).
func TestSchemaRejects(t *testing.T) {
	needHelm(t)
	for _, set := range []string{
		"replicaCount=0",                                        // at least one
		"replicaCount=2,standby.enabled=false",                  // two would both poll and publish
		"replicaCount=2,stream.name=",                           // the lease needs JetStream
		"replicaCount=2,persistence.existingClaim=x",            // one volume for two pods
		"replicaCount=3",                                        // a second standby only mirrors (TestMoreThanTwoReplicas)
		"replicaCount=6,standby.allowExtraStandbys=true",        // at most 5
		"standby.podAntiAffinity=maybe",                         // enum
		"plenty.pasword=typo",                                   // unknown keys are errors, not ignored
		"log.format=xml",                                        // enum json|text
		"log.level=trace",                                       // enum
		"sweep.badEntries=drop",                                 // enum quarantine|hold|skip
		"sweep.pollInterval=30",                                 // a number, not a Go duration
		"sweep.settle=10 s",                                     // not a Go duration
		"sweep.startFrom=yesterday",                             // neither RFC 3339 nor a duration
		"sweep.callShare=0",                                     // (0, 1]
		"sweep.callShare=1.5",                                   // at most 1
		"sweep.itemsPerPage=0",                                  // minimum 1
		"publish.subjectPrefix=orders.*",                        // wildcards
		"publish.subjectPrefix=orders.",                         // empty token
		"stream.name=A.B",                                       // not a stream name
		"stream.replicas=7",                                     // at most 5
		"http.port=0",                                           // a port
		"persistence.size=lots",                                 // a quantity
		"shutdown.terminationGracePeriodSeconds=20",             // must exceed the shutdown timeout (20)
		"shutdown.terminationGracePeriodSeconds=24",             // ... by at least 5 s
		"existingSecret.name=creds,plenty.password=x",           // would be ignored silently
		"nats.tls.enabled=true",                                 // without a secret
		"podDisruptionBudget.maxUnavailable=2",                  // one replica
		"persistence.enabled=false,persistence.existingClaim=x", // the claim would be ignored
		"persistence.retentionPolicy.whenDeleted=Keep",          // Retain or Delete
		"extraVolumes[0].name=state,extraVolumes[0].emptyDir.medium=Memory",           // the chart's own volume
		"prometheusRule.enabled=true,prometheusRule.disabledAlerts[0]=OrderwatchTypo", // no such alert
		"prometheusRule.runbookBaseURL=wiki/runbook",                                  // not a URL
		"helmTest.image.digest=latest",                                                // not a digest
		"dashboards.namespace=Monitoring",                                             // not a namespace name
		"publish.outboxMax=0",                                                         // 0 = unlimited to the binary; OrderwatchOutboxFull would fire forever
		"sweep.keyset=maybe",                                                          // auto, true or false
		"plenty.url=",                                                                 // required
		"plenty.url=shop.example",                                                     // not an http(s) URL
		"plenty.username=",                                                            // required
		"plenty.password=",                                                            // required without existingSecret.name
		"networkPolicy.enabled=yes",                                                   // a boolean
		"networkPolicy.from[0].namespace=monitoring",                                  // not a NetworkPolicyPeer field
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
		"sweep.keyset=auto",
		"sweep.keyset=true",
		"sweep.keyset=false",
		"publish.outboxMax=1",
		"existingSecret.name=creds,plenty.password=", // the password comes from the Secret
		"networkPolicy.enabled=false",
		"networkPolicy.from=null", // only the helm test pod
		"replicaCount=2",
		"replicaCount=3,standby.allowExtraStandbys=true",
	} {
		t.Run("accepts "+set, func(t *testing.T) {
			args := append(renderArgs(""), "--set", set)
			if _, err := runHelm(t, args...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMoreThanTwoReplicas: hot standby means one active pod and one standby.
// A third pod only mirrors the stream: it adds no second poller, costs a
// claim, a node (hard anti-affinity) and possibly one of the shop's three
// sessions, so replicaCount 3 is refused with the reason unless
// standby.allowExtraStandbys says it is meant.
func TestMoreThanTwoReplicas(t *testing.T) {
	needHelm(t)
	_, err := runHelm(t, append(renderArgs(""), "--set", "replicaCount=3")...)
	if err == nil {
		t.Fatal("replicaCount=3 rendered without a word, want a refusal")
	}
	for _, want := range []string{"replicaCount is 3", "standby.allowExtraStandbys", "session"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal of replicaCount=3 lacks %q: %v", want, err)
		}
	}
	out, err := runHelm(t, append(renderArgs(""), "--set", "replicaCount=3,standby.allowExtraStandbys=true")...)
	if err != nil {
		t.Fatal(err)
	}
	sts := parseManifests(t, out).statefulSets[release]
	if sts == nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("allowExtraStandbys: StatefulSet %s, want 3 replicas", js(sts))
	}
}

// TestRequiredValues: the chart's values.yaml alone does not render: the
// schema names the shop's URL, the REST user and the password (or
// existingSecret.name) as required, instead of a pod that exits at start-up.
// And publish.outboxMax 0, with the schema skipped, still stops at the
// chart's own check.
func TestRequiredValues(t *testing.T) {
	needHelm(t)
	base := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	for _, c := range []struct {
		set  []string
		want string
	}{
		{nil, "/plenty/url"},
		{[]string{"plenty.url=https://shop.example"}, "/plenty/username"},
		{[]string{"plenty.url=https://shop.example", "plenty.username=u"}, "/plenty/password"},
	} {
		args := slices.Clone(base)
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		_, err := runHelm(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template --set %v: %v, want a refusal naming %s", c.set, err, c.want)
		}
	}
	if _, err := runHelm(t, append(base, "--set", "plenty.url=https://shop.example,plenty.username=u,existingSecret.name=creds")...); err != nil {
		t.Errorf("existingSecret.name instead of plenty.password: %v", err)
	}
	for _, extra := range [][]string{nil, {"--set", "prometheusRule.enabled=true"}} {
		args := append(renderArgs(""), "--skip-schema-validation", "--set", "publish.outboxMax=0")
		_, err := runHelm(t, append(args, extra...)...)
		if err == nil || !strings.Contains(err.Error(), "publish.outboxMax") || !strings.Contains(err.Error(), "at least 1") {
			t.Errorf("publish.outboxMax=0 without the schema %v: %v, want the chart's own refusal", extra, err)
		}
	}
}

// notesRenderer renders templates/NOTES.txt (helm template leaves it out)
// by wrapping it into a ConfigMap in a copy of the chart. The returned
// function renders it with a values file ("" = the defaults) and --set-json
// values.
func notesRenderer(t *testing.T) func(t *testing.T, values string, set ...string) string {
	t.Helper()
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
	return func(t *testing.T, values string, set ...string) string {
		t.Helper()
		args := []string{"template", release, dir, "--namespace", namespace, "--kube-version", kubeVersion, "--show-only", "templates/zz-notes.yaml",
			"--values", cmp.Or(values, requiredValues)}
		for _, s := range set {
			args = append(args, "--set-json", s)
		}
		out, err := runHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := decodeStrict(out, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data["notes"]
	}
}

// TestNotes: what NOTES.txt tells after an install.
func TestNotes(t *testing.T) {
	notes := notesRenderer(t)
	for _, c := range []struct {
		name        string
		values      string
		set         []string
		want, never []string
	}{
		{"default", "", nil, []string{
			"kubectl -n orderwatch logs -f orderwatch-0",
			"one JSON line per sweep",
			"port-forward svc/orderwatch-metrics 9090:http",
			"curl -fsS http://127.0.0.1:9090/readyz",
			"/metrics | grep '^orderwatch_'",
			"nats sub 'orders.>'",
			"exec orderwatch-0 -c watcher -- /watcher state",
			"curl -fsS http://127.0.0.1:9090/state ",
			"curl -fsS http://127.0.0.1:9090/state/orders/<id>",
			"NetworkPolicy orderwatch admits only networkPolicy.from (the metrics\n   scraper)",
			"helm test orderwatch -n orderwatch",
			"logs orderwatch-test",
			"never\n   logs in to the service",
			`"first sync in progress: N%"`,
		}, []string{"WARNING: persistence.enabled=false", "watcher check", "7. Monitoring", "NOT CONFIGURED", "stop the watcher"}},
		{"ephemeral", "testdata/ephemeral-values.yaml", nil, []string{
			"WARNING: persistence.enabled=false",
			"core NATS, nothing kept",
		}, []string{"NOT CONFIGURED", "NetworkPolicy"}},
		{"full", "testdata/full-values.yaml", nil, []string{
			"nats sub 'shop.orders.>'",
			"nats stream info SHOP_ORDERS",
			"port-forward svc/orderwatch-metrics 8080:http",
			"ServiceMonitor orderwatch scrapes it every 15s",
			"ConfigMap orderwatch-dashboard in namespace\n   monitoring (for Grafana's dashboard sidecar)",
			"PrometheusRule orderwatch; each alert links to its runbook section\n   under https://wiki.example/ops/orderwatch-runbook",
		}, []string{"WARNING", "NOT CONFIGURED", "JSON"}},
		// Two replicas: the active one is whichever holds the lease (pod 0 is
		// the standby after a failover), so the NOTES find it first and point
		// every command at it, never at pod 0.
		{"two replicas", "", []string{`replicaCount=2`}, []string{
			"2 pods, orderwatch-0 and orderwatch-1",
			"pod 0 is not always the active one",
			`exec "$p" -c watcher -- /watcher state -json`,
			`active=$(for p in $(kubectl -n orderwatch get pods -l ` + watcherPodSelector + ` -o name); do`,
			`kubectl -n orderwatch logs -f "$active"`,
			`port-forward "pod/$active" 9090:http`,
			`exec "$active" -c watcher -- /watcher state`,
			"orderwatch_leader",
			"standby: caught up with the stream; active replica",
			"stays Pending",
			"every pod",
		}, []string{"logs -f orderwatch-0", "exec orderwatch-0", "port-forward svc/", "StatefulSet orderwatch: one pod", "watcher check", "allowExtraStandbys"}},
		{"two replicas, soft anti-affinity", "", []string{`replicaCount=2`, `standby.podAntiAffinity="soft"`}, []string{
			"may share a node",
		}, []string{"stays Pending"}},
		{"fleet", "testdata/fleet-values.yaml", nil, []string{
			"runs in fleet mode as StatefulSet orderwatch: 3 member(s),\norderwatch-0 to orderwatch-2",
			"Secret orderwatch-shops (key shops.json",
			"for\ntrying fleet mode out only",
			"an emptyDir per pod",
			"port-forward pod/orderwatch-0 9090:http",
			"/shops/<shop>/readyz",
			"grep '^orderwatch_fleet_'",
			"helm test orderwatch -n orderwatch checks every member",
		}, []string{"hot standby", "WARNING", "orderwatch_leader", "plenty"}},
		{"fleet, existing shops Secret", "testdata/fleet-values.yaml", []string{`fleet.shops={"existingSecret":"my-shops","key":"shops.json","registry":[],"passwords":{}}`}, []string{
			"Secret my-shops",
		}, []string{"trying fleet mode out"}},
		{"three replicas", "", []string{`replicaCount=3`, `standby.allowExtraStandbys=true`}, []string{
			"3 pods, orderwatch-0 to orderwatch-2",
			"2 hot standbys",
			"standby.allowExtraStandbys",
		}, []string{"logs -f orderwatch-0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := notes(t, c.values, c.set...)
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

// fakePod is what one watcher pod answers to the helm test: /readyz (code
// and body) and /metrics (leader "" = no orderwatch_leader: the lease off).
type fakePod struct {
	code   int
	body   string
	leader string
	nats   string
	down   bool // unreachable
}

var (
	podActive      = fakePod{code: 200, body: "ok", leader: "1", nats: "1"}
	podFirstSync   = fakePod{code: 200, body: "first sync in progress: 40%", leader: "1", nats: "1"}
	podStandby     = fakePod{code: 200, body: "standby: caught up with the stream; active replica orderwatch-0", leader: "0", nats: "1"}
	podNoHolder    = fakePod{code: 200, body: "standby: caught up with the stream; no replica holds the lease right now", leader: "0", nats: "1"}
	podBehind      = fakePod{code: 503, body: "standby: behind the stream by 40 events", leader: "0", nats: "1"}
	podNATSDown    = fakePod{code: 503, body: "NATS not connected", leader: "0", nats: "0"}
	podSingle      = fakePod{code: 200, body: "ok", nats: "1"}
	podUnreachable = fakePod{down: true}
)

// TestHelmTestScript runs the helm test pod's script (rendered with two
// replicas) with sh and curl against fake watcher pods: it passes with one
// active pod and ready standbys in any order, and fails when a pod is
// unready or unreachable, or when not exactly one pod holds the lease.
func TestHelmTestScript(t *testing.T) {
	needHelm(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl to run the helm test script with")
	}
	script := testScript(t, "", "--set", "replicaCount=2")
	for _, c := range []struct {
		name  string
		lease bool
		pods  []fakePod
		ok    bool
		want  []string
	}{
		{"active and standby", true, []fakePod{podActive, podStandby}, true, []string{"ok: localhost:", "is the active replica", "is a standby, caught up", "helm test: OK"}},
		{"after a failover: pod 1 active", true, []fakePod{podStandby, podActive}, true, []string{"helm test: OK"}},
		{"active in its first sync", true, []fakePod{podStandby, podFirstSync}, true, []string{"first sync in progress: 40%", "helm test: OK"}},
		{"one replica with the lease", true, []fakePod{podActive}, true, []string{"helm test: OK"}},
		{"one replica without the lease", false, []fakePod{podSingle}, true, []string{"helm test: OK"}},
		{"no replica holds the lease", true, []fakePod{podNoHolder, podNoHolder}, false, []string{"no replica holds the lease", "helm test: FAILED"}},
		{"two replicas report the lease", true, []fakePod{podActive, podActive}, false, []string{"2 replicas report orderwatch_leader 1"}},
		{"standby behind", true, []fakePod{podActive, podBehind}, false, []string{"standby: behind the stream by 40 events", "/readyz answered 503"}},
		{"standby without NATS", true, []fakePod{podActive, podNATSDown}, false, []string{"NATS not connected", `want "orderwatch_nats_connected 1"`}},
		{"a pod unreachable", true, []fakePod{podActive, podUnreachable}, false, []string{"unreachable"}},
		{"lease on but no leader metric", true, []fakePod{podSingle}, false, []string{"no orderwatch_leader"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var urls []string
			for _, p := range c.pods {
				var metrics string
				if p.leader != "" {
					metrics = fmt.Sprintf("# TYPE orderwatch_leader gauge\norderwatch_leader %s\n", p.leader)
				}
				metrics += fmt.Sprintf("orderwatch_nats_connected %s\norderwatch_state_writable 1\norderwatch_outbox_depth 0\n", p.nats)
				urls = append(urls, fakeWatcher(t, p.code, p.body, metrics, p.down))
			}
			runTestScript(t, script, urls, []string{fmt.Sprintf("ORDERWATCH_LEASE=%v", c.lease), "ORDERWATCH_FLEET=false"}, c.ok, c.want)
		})
	}
}

// testScript renders the helm test pod with valuesFile ("" = the defaults)
// and extra helm arguments, and returns its shell script.
func testScript(t *testing.T, valuesFile string, args ...string) string {
	t.Helper()
	out, err := runHelm(t, append(append(renderArgs(valuesFile), args...), "--show-only", "templates/tests/test-release.yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := decodeStrict(out, &pod); err != nil {
		t.Fatal(err)
	}
	cmd := pod.Spec.Containers[0].Command
	if len(cmd) != 3 || cmd[0] != "/bin/sh" || cmd[1] != "-c" {
		t.Fatalf("test pod command %q, want /bin/sh -c SCRIPT", cmd)
	}
	return cmd[2]
}

// fakeWatcher serves /readyz (code, body) and /metrics like a watcher pod
// and returns its URL (down: a closed server, unreachable).
func fakeWatcher(t *testing.T, code int, body, metrics string, down bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(code)
			fmt.Fprintln(w, body)
		case "/metrics":
			fmt.Fprint(w, metrics)
		default:
			http.NotFound(w, r)
		}
	}))
	if down {
		srv.Close()
	} else {
		t.Cleanup(srv.Close)
	}
	return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
}

// runTestScript runs the helm test script against urls with env and checks
// its outcome and output.
func runTestScript(t *testing.T, script string, urls, env []string, wantOK bool, want []string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(append(os.Environ(), "ORDERWATCH_URLS="+strings.Join(urls, " "), "ORDERWATCH_LEASE_WAIT_SECONDS=0"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if ok := err == nil; ok != wantOK {
		t.Errorf("script passed = %v (%v), want %v:\n%s", ok, err, wantOK, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestHelmTestScriptFleet runs the fleet mode's helm test script against
// fake members: it passes when every member is ready, sees every member and
// no free shop, and its shops report NATS and the state file fine; it fails
// otherwise.
func TestHelmTestScriptFleet(t *testing.T) {
	needHelm(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl to run the helm test script with")
	}
	script := testScript(t, "testdata/fleet-values.yaml")
	member := func(members, free int, shopMetrics string) string {
		return fmt.Sprintf("# TYPE orderwatch_fleet_members gauge\norderwatch_fleet_members %d\n"+
			"orderwatch_fleet_shops{state=\"active\"} 2\norderwatch_fleet_shops{state=\"free\"} %d\norderwatch_fleet_fair_share 2\n%s",
			members, free, shopMetrics)
	}
	healthy := "orderwatch_nats_connected{shop=\"berlin\"} 1\norderwatch_state_writable{shop=\"berlin\"} 1\n"
	const ready = "ok: 2 shops active here, 0 starting, fair share 2 of 4 shops over 2 members"
	for _, c := range []struct {
		name string
		pods [][2]string // /readyz body ("" = 503 "below its share"), metrics
		ok   bool
		want []string
	}{
		{"two ready members", [][2]string{{ready, member(2, 0, healthy)}, {ready, member(2, 0, healthy)}}, true,
			[]string{"is a ready member of the fleet", "ok: orderwatch_fleet_members 2", "helm test: OK"}},
		{"a member without shops", [][2]string{{ready, member(2, 0, healthy)}, {ready, member(2, 0, "")}}, true, []string{"helm test: OK"}},
		{"a member not ready", [][2]string{{ready, member(2, 0, healthy)}, {"", member(2, 1, "")}}, false,
			[]string{"below its fair share", "/readyz answered 503", `want "orderwatch_fleet_shops{state="free"} 0"`}},
		{"a member missing from the view", [][2]string{{ready, member(1, 0, healthy)}, {ready, member(2, 0, healthy)}}, false,
			[]string{`want "orderwatch_fleet_members 2"`}},
		{"a shop without NATS", [][2]string{{ready, member(2, 0, "orderwatch_nats_connected{shop=\"paris\"} 0\n")}, {ready, member(2, 0, healthy)}}, false,
			[]string{`orderwatch_nats_connected{shop="paris"} 0`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var urls []string
			for _, p := range c.pods {
				code, body := http.StatusOK, p[0]
				if body == "" {
					code, body = http.StatusServiceUnavailable, "2 shops free and this member below its fair share (1 of 2): taking them"
				}
				urls = append(urls, fakeWatcher(t, code, body, p[1], false))
			}
			runTestScript(t, script, urls, []string{"ORDERWATCH_LEASE=false", "ORDERWATCH_FLEET=true"}, c.ok, c.want)
		})
	}
}

// watcherPodSelector selects the release's watcher pods (the StatefulSet's
// selector), as a kubectl -l argument.
const watcherPodSelector = "app.kubernetes.io/name=orderwatch,app.kubernetes.io/instance=orderwatch,app.kubernetes.io/component=watcher"

// TestNotesFindActive runs the one-liner of the two-replica NOTES that finds
// the active pod against a fake kubectl: pod 1 holds the lease, pod 0 is the
// standby (as after a failover), and the line must name pod 1.
func TestNotesFindActive(t *testing.T) {
	text := notesRenderer(t)(t, "", `replicaCount=2`)
	var line string
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "active=$(") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("NOTES have no line setting active=$(...):\n%s", text)
	}
	bin := t.TempDir()
	fake := `#!/bin/sh
case "$*" in
"-n orderwatch get pods -l ` + watcherPodSelector + ` -o name") printf 'pod/orderwatch-0\npod/orderwatch-1\n' ;;
"-n orderwatch exec pod/orderwatch-0 -c watcher -- /watcher state -json") printf '{\n  "lease": {\n    "instance": "orderwatch-0",\n    "role": "standby",\n    "holder": "orderwatch-1"\n  }\n}\n' ;;
"-n orderwatch exec pod/orderwatch-1 -c watcher -- /watcher state -json") printf '{\n  "lease": {\n    "instance": "orderwatch-1",\n    "role": "active",\n    "holder": "orderwatch-1"\n  }\n}\n' ;;
*) echo "fake kubectl: unexpected arguments: $*" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", line+`
printf '[%s]\n' "$active"`)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	if !strings.Contains(string(out), "[orderwatch-1]") {
		t.Errorf("%s\nsets active to something else than orderwatch-1:\n%s", line, out)
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

// TestFleetValues: fleet mode's values (testdata/fleet-values.yaml plus one
// change each): what the schema and orderwatch.validateFleet refuse, and
// what the variants render.
func TestFleetValues(t *testing.T) {
	needHelm(t)
	const fleetValues = "testdata/fleet-values.yaml"
	render := func(t *testing.T, set ...string) (*manifests, error) {
		t.Helper()
		args := renderArgs(fleetValues)
		for _, s := range set {
			args = append(args, "--set-json", s)
		}
		out, err := runHelm(t, args...)
		if err != nil {
			return nil, err
		}
		return parseManifests(t, out), nil
	}
	entry := func(fields string) string {
		return `fleet.shops.registry=[{"id":"a","url":"https://a.example","username":"u"` + fields + `}]`
	}
	for _, c := range []struct {
		set  []string
		want string // in the refusal
	}{
		{[]string{`fleet.shops.registry=[]`}, "fleet.shops.existingSecret"},                             // no shops at all
		{[]string{`fleet.shops.existingSecret="shops"`}, "would be ignored"},                            // both
		{[]string{entry(`,"password":"p"`)}, "put it in fleet.shops.passwords"},                         // never the password itself, and how to fix it
		{[]string{entry(`,"passwordFile":"/etc/secrets/a"`)}, "/passwordFile"},                          // outside the mounted shops Secret
		{[]string{entry(`,"passwordEnv":"A","id":"Berlin"`)}, "/id"},                                    // the binary's ids are lower-case
		{[]string{entry(`,"passwordEnv":"A","id":"-a"`)}, "/id"},                                        // not first
		{[]string{entry(``)}, "passwordFile"},                                                           // no reference
		{[]string{entry(`,"passwordFile":"/etc/orderwatch/shops/x","passwordEnv":"X"`)}, "passwordEnv"}, // both references
		{[]string{entry(`,"passwordFile":"/etc/orderwatch/shops/nokey"`)}, "names no key"},              // a file the Secret lacks
		{[]string{`fleet.shops.registry=[{"id":"a","url":"https://a.example","username":"u","passwordEnv":"A"},{"id":"a","url":"https://b.example","username":"u","passwordEnv":"B"}]`}, "used twice"},
		{[]string{entry(`,"passwordEnv":"A","id":"a b"`)}, "/id"},                 // not a shop id
		{[]string{entry(`,"passwordEnv":"A","callShare":2`)}, "callShare"},        // (0, 1]
		{[]string{`stream.name=""`}, "JetStream"},                                 // the leases need it
		{[]string{`standby.enabled=false`}, "the lease"},                          // the shops are shared out by leases
		{[]string{`persistence.existingClaim="state"`}, "one volume for one pod"}, // one claim, several members
		{[]string{`fleet.shops.passwords={"shops.json":"x"}`}, "the registry's"},  // would hide the registry
		{[]string{`fleet.replicas=0`}, "/fleet/replicas"},
		{[]string{`fleet.podAntiAffinity="maybe"`}, "/fleet/podAntiAffinity"},
		{[]string{`fleet.stateSizeLimit="lots"`}, "/fleet/stateSizeLimit"},
	} {
		t.Run("refuses "+strings.Join(c.set, " "), func(t *testing.T) {
			_, err := render(t, c.set...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("rendered or refused without %q: %v", c.want, err)
			}
		})
	}

	t.Run("existing shops Secret", func(t *testing.T) {
		m, err := render(t, `fleet.shops={"existingSecret":"my-shops","key":"registry.json","registry":[],"passwords":{}}`)
		if err != nil {
			t.Fatal(err)
		}
		sts := m.statefulSets[release]
		if _, ok := m.secrets[release+"-shops"]; ok {
			t.Errorf("the chart renders a shops Secret although fleet.shops.existingSecret is set")
		}
		if v := volumesByName(sts.Spec.Template.Spec.Volumes)["shops"]; v.Secret == nil || v.Secret.SecretName != "my-shops" {
			t.Errorf("volume shops %s, want the Secret my-shops", js(v))
		}
		if got := m.configMaps[release].Data["WATCHER_SHOPS_FILE"]; got != shopsDir+"/registry.json" {
			t.Errorf("WATCHER_SHOPS_FILE %q, want %s/registry.json", got, shopsDir)
		}
	})
	t.Run("no NATS secret: no chart Secret, no secret volume", func(t *testing.T) {
		m, err := render(t, `nats.password=""`)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.secrets[release]; ok {
			t.Errorf("the chart renders its Secret %s with nothing to hold (fleet mode has no REST password)", release)
		}
		pod := m.statefulSets[release].Spec.Template.Spec
		if _, ok := volumesByName(pod.Volumes)["secret"]; ok {
			t.Errorf("volume secret mounted with nothing in it")
		}
		if _, ok := m.statefulSets[release].Spec.Template.Annotations["checksum/secret"]; ok {
			t.Errorf("checksum/secret of a Secret the chart does not render")
		}
	})
	t.Run("persistent state", func(t *testing.T) {
		m, err := render(t, `fleet.persistentState=true`)
		if err != nil {
			t.Fatal(err)
		}
		sts := m.statefulSets[release]
		if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "state" {
			t.Errorf("claim templates %s, want one named state", js(sts.Spec.VolumeClaimTemplates))
		}
		if _, ok := volumesByName(sts.Spec.Template.Spec.Volumes)["state"]; ok {
			t.Errorf("a pod volume state shadows the claim template")
		}
	})
	t.Run("five members, hard anti-affinity", func(t *testing.T) {
		m, err := render(t, `fleet.replicas=5`, `fleet.podAntiAffinity="hard"`)
		if err != nil {
			t.Fatal(err)
		}
		sts := m.statefulSets[release]
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 5 {
			t.Errorf("replicas %s, want 5", js(sts.Spec.Replicas))
		}
		aff := sts.Spec.Template.Spec.Affinity
		if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
			!selector(t, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector).Matches(labels.Set(sts.Spec.Template.Labels)) {
			t.Errorf("affinity %s, want a required anti-affinity of the members", js(aff))
		}
		if pdb := m.pdbs[release]; pdb == nil || pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
			t.Errorf("PDB %s, want maxUnavailable 1 (one member drained at a time)", js(pdb))
		}
		var urls []string
		for _, e := range m.pods[release+"-test"].Spec.Containers[0].Env {
			if e.Name == "ORDERWATCH_URLS" {
				urls = strings.Fields(e.Value)
			}
		}
		if len(urls) != 5 {
			t.Errorf("helm test: ORDERWATCH_URLS %q, want the 5 members", urls)
		}
		var expr string
		for _, g := range m.prometheusRules[release].Spec.Groups {
			for _, r := range g.Rules {
				if r.Alert == "OrderwatchFleetMembersMissing" {
					expr = r.Expr.String()
				}
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(expr), "< 5") {
			t.Errorf("OrderwatchFleetMembersMissing %q, want a comparison with the 5 members", expr)
		}
	})
	t.Run("default anti-affinity: soft", func(t *testing.T) {
		m, err := render(t)
		if err != nil {
			t.Fatal(err)
		}
		aff := m.statefulSets[release].Spec.Template.Spec.Affinity
		if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
			len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
			t.Errorf("affinity %s, want a preferred anti-affinity (members are interchangeable)", js(aff))
		}
	})
}

// TestDashboardShopView: the dashboard's per-shop view. A variable shop
// (multi, All = .*, which also matches series without the label: single-
// shop mode) filters every query of a pipeline metric and keeps the label
// in its aggregations; a Fleet row shows every orderwatch_fleet_* metric.
func TestDashboardShopView(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Multi      bool   `json:"multi"`
				IncludeAll bool   `json:"includeAll"`
				AllValue   string `json:"allValue"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range dash.Templating.List {
		if v.Name == "shop" {
			found = true
			if !v.Multi || !v.IncludeAll || v.AllValue != ".*" || !strings.Contains(v.Definition, ", shop)") {
				t.Errorf("variable shop: multi %v, includeAll %v, allValue %q, %s; want multi, All = .* (matches an empty label), label_values(..., shop)",
					v.Multi, v.IncludeAll, v.AllValue, v.Definition)
			}
		}
	}
	if !found {
		t.Errorf("no dashboard variable shop")
	}
	metric := regexp.MustCompile(`\borderwatch_[a-z_]+`)
	aggr := regexp.MustCompile(`\b(sum|max|min|avg|count)\s*(by\s*\(([^)]*)\))?\s*\(`)
	fleetSeen := map[string]bool{}
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			names := metric.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				continue
			}
			if strings.HasPrefix(names[0], "orderwatch_fleet_") {
				for _, m := range names {
					fleetSeen[m] = true
				}
				if strings.Contains(tg.Expr, "$shop") {
					t.Errorf("panel %q: %s: the fleet's metrics have no shop label", p.Title, tg.Expr)
				}
				continue
			}
			if names[0] == "orderwatch_build_info" {
				continue
			}
			n++
			if got, want := strings.Count(tg.Expr, `shop=~"$shop"`), strings.Count(tg.Expr, `instance=~"$instance"`); got != want || got == 0 {
				t.Errorf("panel %q: %s\n  filters %d of %d selectors by shop=~\"$shop\"", p.Title, tg.Expr, got, want)
			}
			for _, m := range aggr.FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(m[3], "shop") {
					t.Errorf("panel %q: %s\n  aggregates %q without the label shop (the shops selected would add up)", p.Title, tg.Expr, m[0])
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d queries of pipeline metrics found; has the dashboard changed shape?", n)
	}
	for _, m := range []string{"orderwatch_fleet_members", "orderwatch_fleet_shops", "orderwatch_fleet_fair_share",
		"orderwatch_fleet_pipeline_starts_total", "orderwatch_fleet_pipeline_start_errors_total"} {
		if !fleetSeen[m] {
			t.Errorf("no panel shows %s (the Fleet row)", m)
		}
	}
}

// TestAlertsNameTheShop: in fleet mode every pipeline series carries the
// label shop, so an alert of a pipeline metric must keep it (joins on it,
// aggregations by it) and name it in its text when it is there.
func TestAlertsNameTheShop(t *testing.T) {
	grouping := regexp.MustCompile(`\b(on|by|ignoring|without)\s*\(([^)]*)\)`)
	n := 0
	for _, g := range loadAlertsFile(t).Groups {
		for _, r := range g.Rules {
			expr := r.Expr.String()
			if strings.Contains(expr, "orderwatch_fleet_") {
				continue // the fleet's own: per member, no shop label
			}
			n++
			for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
				if (m[1] == "on" || m[1] == "by") && !strings.Contains(m[2], "shop") {
					t.Errorf("%s: %q drops the label shop: in fleet mode the shops of one member would be joined or added up", r.Alert, m[0])
				}
			}
			for _, k := range []string{"summary", "description"} {
				if !strings.Contains(r.Annotations[k], "{{ with $labels.shop }}") {
					t.Errorf("%s: the %s does not name the shop ({{ with $labels.shop }}...{{ end }}): %q", r.Alert, k, r.Annotations[k])
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("%d per-shop alerts, want the full set", n)
	}
}
