package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"teamsbot/internal/testenv"
	"teamsbot/mcpauth"
	"teamsbot/signin"
	"teamsbot/viewpage"
)

// overlays are the folders under overlays/ that people apply, each with
// its store.
var overlays = map[string]string{"single": "bbolt", "replicated": "postgres"}

// apiTypes maps each kind the manifests may hold to its API version and
// its Go type in k8s.io/api. A kind not listed fails: this test would
// check nothing of it.
var apiTypes = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Deployment":            {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"Service":               {"v1", func() any { return &corev1.Service{} }},
	"ServiceAccount":        {"v1", func() any { return &corev1.ServiceAccount{} }},
	"ConfigMap":             {"v1", func() any { return &corev1.ConfigMap{} }},
	"PersistentVolumeClaim": {"v1", func() any { return &corev1.PersistentVolumeClaim{} }},
	"PodDisruptionBudget":   {"policy/v1", func() any { return &policyv1.PodDisruptionBudget{} }},
}

// rendered is an overlay's objects, decoded.
type rendered struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	account    *corev1.ServiceAccount
	configMaps map[string]*corev1.ConfigMap
	claims     map[string]*corev1.PersistentVolumeClaim
	budget     *policyv1.PodDisruptionBudget
}

// render runs kustomize's library on an overlay folder of fsys, as
// `kubectl apply -k` does, and decodes every object strictly.
func render(fsys filesys.FileSystem, dir string) (rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(fsys, dir)
	if err != nil {
		return rendered{}, fmt.Errorf("kustomize: %w", err)
	}
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}, claims: map[string]*corev1.PersistentVolumeClaim{}}
	for _, res := range resources.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			return rendered{}, err
		}
		obj, err := decodeStrict(doc)
		if err != nil {
			return rendered{}, fmt.Errorf("%s %s: %w", res.GetKind(), res.GetName(), err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployment = o
		case *corev1.Service:
			r.service = o
		case *corev1.ServiceAccount:
			r.account = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.PersistentVolumeClaim:
			r.claims[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.budget = o
		}
	}
	return r, nil
}

// decodeStrict decodes one object into its k8s.io/api type, refusing a
// field the type does not have and a field given twice, as the API
// server's strict field validation does (kubectl apply
// --validate=strict).
func decodeStrict(doc []byte) (any, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	t, ok := apiTypes[head.Kind]
	if !ok {
		return nil, fmt.Errorf("kind %q is not one this test knows: add its type to apiTypes", head.Kind)
	}
	if head.APIVersion != t.apiVersion {
		return nil, fmt.Errorf("apiVersion %q: a %s is %s", head.APIVersion, head.Kind, t.apiVersion)
	}
	// The API server's own decoder: JSON field names match exactly (Go's
	// encoding/json would take readOnlyRootFileSystem for
	// readOnlyRootFilesystem), and a field given twice is refused.
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	obj := t.new()
	strict, err := kjson.UnmarshalStrict(data, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return obj, nil
}

// renderOverlay renders one of the committed overlays.
func renderOverlay(t *testing.T, name string) rendered {
	t.Helper()
	r, err := render(filesys.MakeFsOnDisk(), filepath.Join("overlays", name))
	if err != nil {
		t.Fatalf("overlay %s: %v", name, err)
	}
	if r.deployment == nil || r.service == nil || r.account == nil || r.budget == nil {
		t.Fatalf("overlay %s renders no Deployment, Service, ServiceAccount or PodDisruptionBudget", name)
	}
	return r
}

// TestEveryOverlayRendersStrictly renders every overlay and decodes each
// object into its Kubernetes API type with unknown fields refused; every
// folder under overlays/ must be one of overlays.
func TestEveryOverlayRendersStrictly(t *testing.T) {
	dirs, err := os.ReadDir("overlays")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, d := range dirs {
		found = append(found, d.Name())
	}
	var want []string
	for name := range overlays {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("overlays/ holds %v; this test checks %v", found, want)
	}
	for name := range overlays {
		r := renderOverlay(t, name)
		if r.deployment.Namespace == "" || r.deployment.Namespace != r.account.Namespace {
			t.Errorf("%s: the Deployment's namespace %q and the service account's %q differ", name, r.deployment.Namespace, r.account.Namespace)
		}
	}
}

// TestMisspelledFieldIsRefused proves the check refuses what the API
// server's strict validation refuses: an overlay whose patch misspells a
// field renders with kustomize (which keeps unknown fields) and then fails
// to decode, naming the field.
func TestMisspelledFieldIsRefused(t *testing.T) {
	fsys := filesys.MakeFsInMemory()
	base, err := filepath.Glob("base/*")
	if err != nil || len(base) == 0 {
		t.Fatalf("no base files (%v)", err)
	}
	for _, f := range base {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(filepath.Join("/k", f), data); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	overlay := func(patch string) string {
		n++
		dir := fmt.Sprintf("/k/overlays/patch%d", n)
		must(t, fsys.WriteFile(dir+"/kustomization.yaml", []byte("resources:\n  - ../../base\npatches:\n  - path: patch.yaml\n")))
		must(t, fsys.WriteFile(dir+"/patch.yaml", []byte(patch)))
		return dir
	}
	const good = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: teamsbot
spec:
  template:
    spec:
      containers:
        - name: teamsbot
          securityContext:
            readOnlyRootFilesystem: true
`
	if _, err := render(fsys, overlay(good)); err != nil {
		t.Fatalf("the well-spelled patch is refused: %v", err)
	}
	typo := strings.Replace(good, "readOnlyRootFilesystem", "readOnlyRootFileSystem", 1)
	_, err = render(fsys, overlay(typo))
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`) {
		t.Fatalf("a misspelled field was not refused by name: %v", err)
	}
	// So is a misspelling that differs in more than case.
	if _, err := render(fsys, overlay(strings.Replace(good, "securityContext", "securityContex", 1))); err == nil || !strings.Contains(err.Error(), `unknown field "spec.template.spec.containers[0].securityContex"`) {
		t.Fatalf("a misspelled field was not refused by name: %v", err)
	}
	// A field of the right name at the wrong place is refused too.
	misplaced := strings.Replace(good, "          securityContext:\n            readOnlyRootFilesystem: true\n", "          readOnlyRootFilesystem: true\n", 1)
	if _, err := render(fsys, overlay(misplaced)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("a misplaced field was not refused: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestOverlaysAgreeWithTheImageAndTheService checks, for every overlay,
// that what the manifests set is what the image and the service expect:
// the settings are ones the service takes (its own `teamsbot config`
// parses them), the ports and the probes are its listeners, the data
// folder and the user are the image's, the root file system is read-only
// and the one writable volume is the data of a bbolt store.
func TestOverlaysAgreeWithTheImageAndTheService(t *testing.T) {
	img := readImage(t)
	secrets := docSecrets(t)
	for name, store := range overlays {
		t.Run(name, func(t *testing.T) {
			r := renderOverlay(t, name)
			pod := r.deployment.Spec.Template.Spec
			if len(pod.Containers) != 1 || pod.Containers[0].Name != "teamsbot" {
				t.Fatalf("want one container named teamsbot, got %d", len(pod.Containers))
			}
			c := pod.Containers[0]
			env := environment(t, r, c, img, secrets)
			effective := teamsbotConfig(t, env)

			// The settings: each TICKETIQ_ and OTEL_ name is one the
			// service lists, and the service takes every value
			// (teamsbotConfig fails otherwise).
			known := knownSettings(t)
			for n := range env {
				if (strings.HasPrefix(n, "TICKETIQ_") || strings.HasPrefix(n, "OTEL_")) && !known[n] {
					t.Errorf("the manifests set %s, which `teamsbot help config` does not list", n)
				}
			}

			// The ports: the container's ports are the service's two
			// listeners, and the probes use the internal one.
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if got, want := ports["http"], listenPort(t, effective["TICKETIQ_ADDR"]); got != want {
				t.Errorf("container port http is %d; the service listens on %d (TICKETIQ_ADDR %q)", got, want, effective["TICKETIQ_ADDR"])
			}
			internal := listenPort(t, effective["TICKETIQ_METRICS_ADDR"])
			if ports["internal"] != internal {
				t.Errorf("container port internal is %d; the internal listener is on %d (TICKETIQ_METRICS_ADDR %q)", ports["internal"], internal, effective["TICKETIQ_METRICS_ADDR"])
			}
			if ports["http"] != img.port || ports["internal"] != img.metricsPort {
				t.Errorf("the container's ports are %d and %d; the image's are %d and %d", ports["http"], ports["internal"], img.port, img.metricsPort)
			}
			if len(c.Ports) != 2 {
				t.Errorf("the container names %d ports; the service has two listeners", len(c.Ports))
			}
			for _, p := range []struct {
				what  string
				probe *corev1.Probe
				path  string
			}{{"startupProbe", c.StartupProbe, "/healthz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s: missing, or not an HTTP GET", p.what)
					continue
				}
				if p.probe.HTTPGet.Path != p.path {
					t.Errorf("%s asks %s; want %s", p.what, p.probe.HTTPGet.Path, p.path)
				}
				if got := portNumber(p.probe.HTTPGet.Port, ports); got != internal {
					t.Errorf("%s is on port %d; the internal listener is on %d", p.what, got, internal)
				}
			}
			// /readyz is on the internal listener only once it is set: the
			// Service must not route people to it.
			if len(r.service.Spec.Selector) == 0 {
				t.Error("the Service selects no pods")
			}
			for k, v := range r.service.Spec.Selector {
				if r.deployment.Spec.Template.Labels[k] != v {
					t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
				}
			}
			for _, sp := range r.service.Spec.Ports {
				if portNumber(sp.TargetPort, ports) == internal {
					t.Errorf("the Service exposes the internal port %d", internal)
				}
				if portNumber(sp.TargetPort, ports) != ports["http"] {
					t.Errorf("the Service's port %s reaches %v, not the container's http port", sp.Name, sp.TargetPort.String())
				}
			}

			// The image's user, a read-only root and no privilege.
			sc := pod.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Error("the pod does not ask runAsNonRoot")
			} else {
				if sc.RunAsUser == nil || *sc.RunAsUser != img.uid || sc.RunAsGroup == nil || *sc.RunAsGroup != img.gid {
					t.Errorf("the pod runs as %v:%v; the image's user is %d:%d", deref(sc.RunAsUser), deref(sc.RunAsGroup), img.uid, img.gid)
				}
				if sc.FSGroup == nil || *sc.FSGroup != img.gid {
					t.Errorf("fsGroup is %v; the image's group is %d", deref(sc.FSGroup), img.gid)
				}
				if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Error("the pod's seccomp profile is not RuntimeDefault")
				}
			}
			csc := c.SecurityContext
			switch {
			case csc == nil:
				t.Error("the container has no securityContext")
			default:
				if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
					t.Error("the root file system is not read-only")
				}
				if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
					t.Error("privilege escalation is not refused")
				}
				if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
					t.Errorf("capabilities %+v: want ALL dropped and none added", csc.Capabilities)
				}
				if csc.Privileged != nil && *csc.Privileged {
					t.Error("the container is privileged")
				}
			}

			// The data folder is the image's, and the only place the pod
			// may write: a claimed volume on bbolt, nothing on PostgreSQL.
			data := effective["TICKETIQ_DATA"]
			if data != img.data {
				t.Errorf("TICKETIQ_DATA is %q; the image's data folder is %q", data, img.data)
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range pod.Volumes {
				volumes[v.Name] = v
			}
			var writable []string
			files := map[string]bool{}
			for _, m := range c.VolumeMounts {
				v, ok := volumes[m.Name]
				if !ok {
					t.Errorf("volume mount %s names no volume", m.Name)
					continue
				}
				if !m.ReadOnly && v.Secret == nil && v.ConfigMap == nil {
					writable = append(writable, m.MountPath)
				}
				if v.Secret != nil && v.Secret.SecretName == "teamsbot-keys" {
					switch {
					case m.MountPath == data && m.SubPath == "":
						for k := range secrets["teamsbot-keys"] {
							files[filepath.Join(data, k)] = true
						}
					case m.SubPath != "" && m.MountPath == filepath.Join(data, m.SubPath):
						files[m.MountPath] = true
					default:
						t.Errorf("the key files are mounted at %s (subPath %q), not in the data folder %s", m.MountPath, m.SubPath, data)
					}
				}
			}
			switch store {
			case "bbolt":
				if effective["TICKETIQ_DATABASE_URL"] != "" {
					t.Error("the bbolt overlay sets TICKETIQ_DATABASE_URL")
				}
				if !slices.Equal(writable, []string{data}) {
					t.Errorf("writable mounts %v; want the data folder %s alone", writable, data)
				}
				for _, m := range c.VolumeMounts {
					if m.MountPath == data {
						pvc := volumes[m.Name].PersistentVolumeClaim
						if pvc == nil || r.claims[pvc.ClaimName] == nil {
							t.Errorf("the data folder is not a PersistentVolumeClaim of the overlay")
						}
					}
				}
				if n := r.deployment.Spec.Replicas; n == nil || *n != 1 {
					t.Errorf("replicas %v: bbolt allows one process", deref(n))
				}
				if r.deployment.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("strategy %q: on bbolt an update must stop the old pod before the new one opens the file", r.deployment.Spec.Strategy.Type)
				}
			case "postgres":
				if !strings.HasPrefix(effective["TICKETIQ_DATABASE_URL"], "postgres") {
					t.Error("the replicated overlay sets no TICKETIQ_DATABASE_URL")
				}
				if len(writable) > 0 {
					t.Errorf("writable mounts %v: on PostgreSQL the service writes nothing to disk", writable)
				}
				if n := r.deployment.Spec.Replicas; n == nil || *n < 2 {
					t.Errorf("replicas %v: the replicated overlay runs several", deref(n))
				}
				if s := r.deployment.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil || s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
					t.Errorf("strategy %+v: replicas are replaced one at a time, none taken down first", s)
				}
			}
			// Every key file the service reads from its data folder (its
			// own names) comes from the Secret.
			for _, f := range []string{viewpage.TokenKeyFile, signin.CookieKeyFile, filepath.Base(mcpauth.TokenKeys("").Path)} {
				if !files[filepath.Join(data, f)] {
					t.Errorf("the key file %s is not mounted from the Secret teamsbot-keys into %s", f, data)
				}
			}

			// Secrets: each reference is made by the guide's kubectl
			// create secret commands.
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					ref := e.ValueFrom.SecretKeyRef
					if _, ok := secrets[ref.Name][ref.Key]; !ok {
						t.Errorf("%s comes from the Secret %s, key %s, which docs/kubernetes.md does not create", e.Name, ref.Name, ref.Key)
					}
				}
			}

			// Stopping: the grace outlasts preStop and the service's drain.
			grace := pod.TerminationGracePeriodSeconds
			var wait int64
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				wait = c.Lifecycle.PreStop.Sleep.Seconds
			}
			if drain := shutdownSeconds(t); grace == nil || *grace < wait+drain+5 {
				t.Errorf("terminationGracePeriodSeconds %v: the pod waits %d s (preStop), then the service drains up to %d s; give it 5 s more", deref(grace), wait, drain)
			}

			// Resources.
			req, lim := c.Resources.Requests, c.Resources.Limits
			if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
				t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
			}

			// Workload identity as README describes it.
			if pod.ServiceAccountName != r.account.Name {
				t.Errorf("the pod runs as %q, not the service account %q", pod.ServiceAccountName, r.account.Name)
			}
			if got := r.deployment.Spec.Template.Labels["azure.workload.identity/use"]; got != "true" {
				t.Errorf("the pod's label azure.workload.identity/use is %q; the webhook mutates only pods labelled \"true\"", got)
			}
			if got, want := r.account.Annotations["azure.workload.identity/client-id"], effective["TICKETIQ_BOT_APP_ID"]; got != want || want == "" {
				t.Errorf("the service account's client-id %q is not the bot's app id %q", got, want)
			}

			// The disruption budget covers these pods.
			for k, v := range r.budget.Spec.Selector.MatchLabels {
				if r.deployment.Spec.Template.Labels[k] != v {
					t.Errorf("the PodDisruptionBudget selects %s=%s, which the pods do not carry", k, v)
				}
			}
			if r.budget.Spec.MaxUnavailable == nil && r.budget.Spec.MinAvailable == nil {
				t.Error("the PodDisruptionBudget bounds nothing")
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// portNumber resolves a port given by number or by the container's name.
func portNumber(p intstr.IntOrString, named map[string]int32) int32 {
	if p.Type == intstr.String {
		return named[p.StrVal]
	}
	return p.IntVal
}

// listenPort is the port of a host:port the service listens on.
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	n, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil || n == 0 {
		t.Fatalf("listen address %q has no fixed port", addr)
	}
	return int32(n)
}

// environment is the container's environment as the service would see
// it: the image's variables, the ConfigMaps it takes whole, then its own
// variables, with values from Secrets taken from the guide's commands.
// A variable whose value comes from elsewhere (GOMEMLIMIT from the
// memory limit) is left out.
func environment(t *testing.T, r rendered, c corev1.Container, img image, secrets map[string]map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, v := range img.env {
		env[k] = v
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			t.Fatalf("envFrom %+v: only ConfigMaps are read whole", from)
		}
		cm := r.configMaps[from.ConfigMapRef.Name]
		if cm == nil {
			t.Fatalf("envFrom names the ConfigMap %s, which the overlay does not make", from.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = fillPlaceholders(secrets[e.ValueFrom.SecretKeyRef.Name][e.ValueFrom.SecretKeyRef.Key])
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := r.configMaps[ref.Name]
			if cm == nil {
				t.Fatalf("%s names the ConfigMap %s, which the overlay does not make", e.Name, ref.Name)
			}
			env[e.Name] = cm.Data[ref.Key]
		}
	}
	return env
}

// placeholders are what the guide writes for values only the reader has,
// with values of their form.
var placeholders = map[string]string{
	"<client secret>":     "guide-client-secret",
	"<database password>": "guide-database-password",
	"<database host>":     "teamsbot-pg.postgres.database.azure.com",
}

// fillPlaceholders puts the placeholders' values in a value of the guide.
func fillPlaceholders(s string) string {
	for k, v := range placeholders {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// teamsbotBinary builds cmd/teamsbot once for the package's tests.
func teamsbotBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "teamsbot-k8s-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "teamsbot")
		out, err := exec.Command("go", "build", "-o", binary, "teamsbot/cmd/teamsbot").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// teamsbotConfig runs `teamsbot config` with the manifests' environment,
// as the service parses it at start, and returns the effective value of
// each setting. Workload identity's webhook sets AZURE_FEDERATED_TOKEN_FILE
// in the pod; here it names a token file of the test's own.
func teamsbotConfig(t *testing.T, env map[string]string) map[string]string {
	t.Helper()
	token := filepath.Join(t.TempDir(), "azure-identity-token")
	must(t, os.WriteFile(token, []byte("eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl"), 0o600))
	cmd := exec.Command(teamsbotBinary(t), "config")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AZURE_FEDERATED_TOKEN_FILE=" + token}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("teamsbot config refuses the manifests' settings (%v):\n%s", err, stderr.String())
	}
	out := map[string]string{}
	line := regexp.MustCompile(`^([A-Z0-9_]+)=("(?:[^"\\]|\\.)*")\t`)
	for _, l := range strings.Split(stdout.String(), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			v, err := strconv.Unquote(m[2])
			if err != nil {
				t.Fatalf("teamsbot config printed %q", l)
			}
			out[m[1]] = v
		}
	}
	if out["TICKETIQ_ADDR"] == "" {
		t.Fatalf("teamsbot config printed no TICKETIQ_ADDR:\n%s", stdout.String())
	}
	return out
}

// knownSettings are the variables `teamsbot help config` lists.
func knownSettings(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(teamsbotBinary(t), "help", "config").Output()
	if err != nil {
		t.Fatalf("teamsbot help config: %v", err)
	}
	known := map[string]bool{}
	for _, n := range regexp.MustCompile(`\b(?:TICKETIQ|OTEL)_[A-Z0-9_]+\b`).FindAllString(string(out), -1) {
		known[n] = true
	}
	if !known["TICKETIQ_ADDR"] {
		t.Fatalf("teamsbot help config lists no TICKETIQ_ADDR:\n%s", out)
	}
	return known
}

// shutdownSeconds is how long the service may take to stop after SIGTERM,
// as docs/operations.md says it (cmd/teamsbot's shutdownGrace).
func shutdownSeconds(t *testing.T) int64 {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`finishes the turns[^(]*\(up to (\d+) seconds\)`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md no longer says how long the shutdown takes (up to N seconds)")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// docSecrets reads the Secrets docs/kubernetes.md makes with kubectl
// create secret generic: each Secret's keys, with the value of a
// --from-literal (a --from-file's value is its path).
func docSecrets(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, cmd := range docCommands(t, "kubectl") {
		w := cmd
		if len(w) < 5 || w[1] != "create" || w[2] != "secret" || w[3] != "generic" {
			continue
		}
		name := w[4]
		keys := map[string]string{}
		for _, arg := range w[5:] {
			for _, flag := range []string{"--from-literal=", "--from-file="} {
				rest, ok := strings.CutPrefix(arg, flag)
				if !ok {
					continue
				}
				k, v, ok := strings.Cut(rest, "=")
				if !ok {
					k, v = filepath.Base(rest), rest
				}
				keys[k] = v
			}
		}
		out[name] = keys
	}
	if len(out["teamsbot-keys"]) == 0 || len(out["teamsbot-secrets"]) == 0 {
		t.Fatalf("docs/kubernetes.md creates no Secrets teamsbot-keys and teamsbot-secrets (found %v)", out)
	}
	return out
}

// docCommands returns the commands of docs/kubernetes.md's sh blocks that
// run program, split into words.
func docCommands(t *testing.T, program string) [][]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	in := false
	var cur string
	for _, l := range strings.Split(string(doc), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			in = !in && trimmed == "```sh"
			continue
		}
		if !in {
			continue
		}
		if c, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur += c + " "
			continue
		}
		cur += trimmed
		if w := testenv.ShellWords(cur); len(w) > 0 && w[0] == program {
			out = append(out, w)
		}
		cur = ""
	}
	return out
}

// TestGuideAppliesEveryOverlay holds docs/kubernetes.md to the overlays:
// each `kubectl apply -k` names an overlay this test renders, each overlay
// is applied by one, and every key the guide puts in a Secret is read by
// an overlay.
func TestGuideAppliesEveryOverlay(t *testing.T) {
	applied := map[string]bool{}
	for _, w := range docCommands(t, "kubectl") {
		if len(w) >= 4 && w[1] == "apply" && w[2] == "-k" {
			name, ok := strings.CutPrefix(w[3], "deploy/kubernetes/overlays/")
			if _, known := overlays[name]; !ok || !known {
				t.Errorf("docs/kubernetes.md applies %s, which is no overlay", w[3])
			}
			applied[name] = true
		}
	}
	for name := range overlays {
		if !applied[name] {
			t.Errorf("docs/kubernetes.md never applies the overlay %s", name)
		}
	}
	used := map[string]bool{}
	for name := range overlays {
		r := renderOverlay(t, name)
		pod := r.deployment.Spec.Template.Spec
		for _, e := range pod.Containers[0].Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				used[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key] = true
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret == nil {
				continue
			}
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name != v.Name {
					continue
				}
				if m.SubPath != "" {
					used[v.Secret.SecretName+"/"+m.SubPath] = true
				} else {
					used[v.Secret.SecretName+"/*"] = true
				}
			}
		}
	}
	for name, keys := range docSecrets(t) {
		for k := range keys {
			if !used[name+"/"+k] && !used[name+"/*"] {
				t.Errorf("docs/kubernetes.md puts %s in the Secret %s, and no overlay reads it", k, name)
			}
		}
	}
}
