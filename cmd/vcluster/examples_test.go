package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/units"
)

const examplesDir = "../../examples"

// runLines returns the commands of an example file's "# Run:" comment:
// the line that starts with "# Run: vcluster …" and the "#   vcluster …"
// lines right after it, each split into arguments without "vcluster".
func runLines(body string) [][]string {
	var out [][]string
	inRun := false
	for _, l := range strings.Split(body, "\n") {
		text, isComment := strings.CutPrefix(l, "#")
		if !isComment {
			inRun = false
			continue
		}
		text = strings.TrimSpace(text)
		if rest, ok := strings.CutPrefix(text, "Run:"); ok {
			text, inRun = strings.TrimSpace(rest), true
		}
		if f := strings.Fields(text); inRun && len(f) > 1 && f[0] == "vcluster" {
			out = append(out, f[1:])
		} else {
			inRun = false
		}
	}
	return out
}

// flagValue returns the value of --name in args, or "".
func flagValue(args []string, name string) string {
	if i := slices.Index(args, "--"+name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// untestedReadme are the commands examples/README.md shows that
// TestExamples does not run, and why.
var untestedReadme = map[string]bool{
	"run --quick --config examples/clusters/C.yaml":                                           true, // the preflight and allreduce-loss at quick size: ~8-28 s alone (TestRunWritesReport runs run --quick)
	`collective --workload "$(grep -v '^#' examples/workloads/moe.txt)" --hosts 16 --iters 2`: true, // shell; the same as moe.txt's Run line
	"collective --list": true, // lists the algorithms
}

var (
	readmeCommand    = regexp.MustCompile("(?m)(?:`|^)vcluster ([^`\n]+)")
	collectiveHeader = regexp.MustCompile(`(?m)^# vcluster collective: .*?(\d+) plane\(s\) × (\S+), forwarding (\w+)`)
	pingSummary      = regexp.MustCompile(`(?m)^--- (\d+) transmitted, (\d+) received`)
	faultRow         = regexp.MustCompile(`(?m)^\d+\s+[a-z_]+\s+.*\s(\S+)$`)
)

// checkRun runs one Run command of an example (paths under examples/
// made absolute, in a temporary working directory for what it writes) and
// checks what it prints against the config it names.
func checkRun(t *testing.T, root string, args []string) {
	t.Helper()
	args = slices.Clone(args)
	for i, a := range args {
		if strings.HasPrefix(a, "examples/") {
			args[i] = filepath.Join(root, a)
		}
	}
	t.Chdir(t.TempDir())
	start := time.Now()
	code, out, errOut := runCLI(t, args...)
	t.Logf("vcluster %s: exit %d, %.2f s", strings.Join(args, " "), code, time.Since(start).Seconds())
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var sets []string
	if p := flagValue(args, "preset"); p != "" {
		sets = append(sets, "fabric.preset="+p)
	}
	cfg, err := config.Load(flagValue(args, "config"), sets)
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fabric
	switch args[0] {
	case "topo":
		want := f.Topology + ", " + strconv.Itoa(f.Planes) + " plane(s), forwarding " + f.Forwarding
		if !strings.Contains(out, "topology   "+want+"\n") || !strings.Contains(out, units.FormatSpeed(f.HostLinkBps())) {
			t.Errorf("topo does not print the config's fabric (%s, %s):\n%s", want, f.HostLinkSpeed, out)
		}
	case "ping":
		m := pingSummary.FindStringSubmatch(out)
		if m == nil || m[1] != m[2] || m[1] == "0" {
			t.Errorf("ping lost replies:\n%s", out)
		}
	case "collective":
		m := collectiveHeader.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no header in:\n%s", out)
		}
		// collective's cluster is preset C unless the config or --set says otherwise.
		if cfg.Fabric.Preset == "" {
			c, err := config.Load(flagValue(args, "config"), append(sets, "fabric.preset=C"))
			if err != nil {
				t.Fatal(err)
			}
			f = c.Fabric
		}
		if m[1] != strconv.Itoa(f.Planes) || m[2] != units.FormatSpeed(f.HostLinkBps()) || m[3] != f.Forwarding {
			t.Errorf("collective ran on %s plane(s) × %s, %s; the config says %d × %s, %s", m[1], m[2], m[3], f.Planes, f.HostLinkSpeed, f.Forwarding)
		}
	case "drill":
		if !strings.Contains(out, "→ completed") {
			t.Errorf("the drill's job did not complete:\n%s", out)
		}
		rows := faultRow.FindAllStringSubmatch(out, -1)
		if len(rows) == 0 {
			t.Errorf("no fault rows in:\n%s", out)
		}
		for _, r := range rows {
			if r[1] == "after_job_end" {
				t.Errorf("a fault started after the job ended (not judged under traffic):\n%s", out)
			}
		}
	default:
		t.Fatalf("no check for the command %q", args[0])
	}
}

// Every file under examples/ is run as its Run lines say, and checked:
// cluster configs (one per preset) load and build the fabric they
// describe, fault plans (one per named production pattern) are the
// scenario's and their drills complete with every fault under traffic,
// workloads parse and run. A file of no known kind, or without a Run
// line, fails; so does a preset or scenario without its example.
func TestExamples(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var files []string
	err = filepath.WalkDir(examplesDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(examplesDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(examplesDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, rel := range files {
		have[rel] = true
	}
	for _, p := range config.PresetNames() {
		if !have["clusters/"+p+".yaml"] {
			t.Errorf("preset %s has no examples/clusters/%s.yaml", p, p)
		}
	}
	for _, s := range faults.ScenarioNames() {
		if !have["faults/"+s+".yaml"] {
			t.Errorf("scenario %s has no examples/faults/%s.yaml", s, s)
		}
	}
	tested := map[string]bool{}
	for _, rel := range files {
		body, _ := os.ReadFile(filepath.Join(examplesDir, rel))
		for _, args := range runLines(string(body)) {
			tested[strings.Join(args, " ")] = true
		}
	}
	for _, m := range readmeCommand.FindAllStringSubmatch(string(readme), -1) {
		if cmd := m[1]; !tested[cmd] && !untestedReadme[cmd] {
			t.Errorf("examples/README.md shows `vcluster %s`, which is no example's Run line", cmd)
		}
	}
	for _, rel := range files {
		if rel == "README.md" {
			continue
		}
		t.Run(rel, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(examplesDir, rel))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(readme), "("+rel+")") {
				t.Errorf("examples/README.md does not link %s", rel)
			}
			full := filepath.Join(root, "examples", rel)
			switch dir := filepath.Dir(rel); {
			case dir == "clusters" && strings.HasSuffix(rel, ".yaml"):
				cfg, err := config.Load(full, nil)
				if err != nil {
					t.Fatalf("does not load: %v", err)
				}
				stem := strings.TrimSuffix(filepath.Base(rel), ".yaml")
				if slices.Contains(config.PresetNames(), stem) && cfg.Fabric.Preset != stem {
					t.Errorf("fabric.preset is %q, want %q (the file's name)", cfg.Fabric.Preset, stem)
				}
			case dir == "faults" && strings.HasSuffix(rel, ".yaml"):
				checkPlanExample(t, rel, body)
			case dir == "workloads" && strings.HasSuffix(rel, ".txt"):
				checkWorkloadExample(t, string(body))
			default:
				t.Fatalf("no test case for a file of this kind (add one to TestExamples)")
			}
			cmds := runLines(string(body))
			if len(cmds) == 0 {
				t.Fatalf("no \"# Run: vcluster …\" line: the test runs those")
			}
			for _, args := range cmds {
				checkRun(t, root, args)
			}
		})
	}
	t.Logf("examples: %d files in %.1f s", len(files), time.Since(start).Seconds())
}

// checkPlanExample: the plan parses, resolves on cluster C and has the
// events of the scenario it is named after, at its own times.
func checkPlanExample(t *testing.T, rel string, body []byte) {
	t.Helper()
	plan, err := faults.ParsePlan(rel, body)
	if err != nil {
		t.Fatalf("does not parse: %v", err)
	}
	cfg, err := config.Load("", []string{"fabric.preset=C"})
	if err != nil {
		t.Fatal(err)
	}
	if err := faults.CheckPlan(cfg, plan); err != nil {
		t.Fatalf("does not resolve on cluster C: %v", err)
	}
	name := strings.TrimSuffix(filepath.Base(rel), ".yaml")
	if !slices.Contains(faults.ScenarioNames(), name) {
		return // a plan of its own, not a named pattern
	}
	if len(plan.Events) == 0 {
		t.Fatal("no events")
	}
	ev := plan.Events[0]
	dur := ev.Duration
	if b, err := time.ParseDuration(ev.Params["boot"]); err == nil {
		dur = b
	}
	want, err := faults.Scenario(name, ev.At, dur)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Events) != len(want.Events) {
		t.Fatalf("%d events, scenario %s has %d", len(plan.Events), name, len(want.Events))
	}
	for i, w := range want.Events {
		g := plan.Events[i]
		if g.Kind != w.Kind || g.Target != w.Target || g.At != w.At || g.Duration != w.Duration || !sameParams(g.Params, w.Params) {
			t.Errorf("event %d: %s %s at %v for %v %v; scenario %s: %s %s at %v for %v %v",
				i, g.Kind, g.Target, g.At, g.Duration, g.Params, name, w.Kind, w.Target, w.At, w.Duration, w.Params)
		}
	}
}

// sameParams compares parameters as values: "500us" is "500µs".
func sameParams(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok {
			return false
		}
		dx, ex := time.ParseDuration(x)
		dy, ey := time.ParseDuration(y)
		if x != y && (ex != nil || ey != nil || dx != dy) {
			return false
		}
	}
	return true
}

// checkWorkloadExample: one non-comment line, a workload that parses,
// and the Run lines pass exactly that line to --workload.
func checkWorkloadExample(t *testing.T, body string) {
	t.Helper()
	var specs []string
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			specs = append(specs, l)
		}
	}
	if len(specs) != 1 {
		t.Fatalf("want one workload line under the comment, got %d: %q", len(specs), specs)
	}
	if _, err := collectives.ParseWorkload(specs[0]); err != nil {
		t.Fatalf("workload %q: %v", specs[0], err)
	}
	for _, args := range runLines(body) {
		if args[0] != "collective" || flagValue(args, "workload") != specs[0] {
			t.Errorf("Run line %q does not run collective --workload %s", args, specs[0])
		}
	}
}
