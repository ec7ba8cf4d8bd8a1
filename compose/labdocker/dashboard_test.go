package labdocker_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/compose/labfabric"
	"github.com/vcluster/vcluster/compose/labhost"
)

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			Type, UID string
		} `json:"datasource"`
		Targets []struct {
			RefID      string `json:"refId"`
			Expr       string `json:"expr"`
			Datasource struct {
				Type, UID string
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	// What a PromQL expression holds that is not a metric name: strings,
	// label matchers, ranges, and the label lists of grouping modifiers.
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset"}
)

// metricNames are the metric names an expression selects.
func metricNames(expr string) []string {
	e := promString.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, "")
	e = promRange.ReplaceAllString(e, "")
	e = promGrouping.ReplaceAllString(e, "")
	var out []string
	for _, m := range promIdent.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(promKeywords, m) {
			continue // a function or an aggregation, or an operator
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNamesOfExpr(t *testing.T) {
	got := metricNames(`sum by (host, plane) (rate(a_total{x="y",z=~"q{1}"}[$__rate_interval]) and on (instance) b) * on (instance) group_left (host) c > 0`)
	if want := []string{"a_total", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("metricNames = %q, want %q", got, want)
	}
}

// TestDashboardMetricsExist checks that every query of the lab's Grafana
// dashboard selects metrics the fabric or a host serves, on the
// provisioned datasource.
func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.UID == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, schemaVersion %d: want a uid and schemaVersion ≥ 36", d.UID, d.SchemaVersion)
	}
	served := map[string]string{}
	for _, n := range labfabric.MetricNames() {
		served[n] = "fabric"
	}
	for _, n := range labhost.MetricNames() {
		served[n] = "host"
	}
	if len(served) < 20 {
		t.Fatalf("the fabric and host serve %d metric names; the descriptor lists look empty", len(served))
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "vcluster-prometheus" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want prometheus uid vcluster-prometheus", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != "vcluster-prometheus" {
				t.Errorf("panel %q target %s: datasource uid %q, want vcluster-prometheus", p.Title, tg.RefID, tg.Datasource.UID)
			}
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q target %s: %q selects no metric", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if served[n] == "" {
					t.Errorf("panel %q target %s: %s is served by neither the fabric nor a host (expr %q)", p.Title, tg.RefID, n, tg.Expr)
				}
			}
		}
	}
	// The panels the lab's users look at first.
	for _, n := range []string{"vcluster_port_queue_bytes", "vcluster_port_trims_total", "vcluster_port_pfc_pause_tx_total",
		"vcluster_tunnel_frames_in_total", "vcluster_fabric_lag_seconds", "vcluster_loop_lag_seconds", "vcluster_host_evs",
		"vcluster_transport_bytes_completed_total", "vcluster_transport_retransmissions_total", "vcluster_transport_timeouts_total"} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}
