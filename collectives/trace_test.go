package collectives

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The timeline is valid trace-event JSON with one track per rank.
func TestTraceFormat(t *testing.T) {
	const P = 5
	c := newCluster(t, "mrc", 16)
	m := newComm(t, c, Options{Hosts: firstHosts(P), Chunk: 16 << 10, Trace: true})
	if _, err := m.Run(mustLookup(t, "allreduce/ring"), 64<<10, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.Trace().WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   *float64       `json:"ts"`
			Dur  *float64       `json:"dur"`
			Pid  *int           `json:"pid"`
			Tid  *int           `json:"tid"`
			ID   string         `json:"id"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	names := map[int]string{}
	kinds := map[string]int{}
	tracks := map[[2]int]bool{}
	open := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Pid == nil || e.Tid == nil || *e.Pid != *e.Tid || *e.Pid < 0 || *e.Pid >= P {
			t.Fatalf("event %+v: pid/tid not a rank", e)
		}
		tracks[[2]int{*e.Pid, *e.Tid}] = true
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				names[*e.Pid] = e.Args["name"].(string)
			}
			continue
		case "X":
			if e.Dur == nil || *e.Dur < 0 {
				t.Fatalf("complete event without a duration: %+v", e)
			}
		case "b":
			open[e.ID]++
		case "e":
			open[e.ID]--
		case "i":
		default:
			t.Fatalf("unexpected phase %q", e.Ph)
		}
		if e.Ts == nil || *e.Ts < 0 {
			t.Fatalf("event without ts: %+v", e)
		}
		kinds[e.Name[:min(4, len(e.Name))]]++
	}
	if len(tracks) != P || len(names) != P {
		t.Errorf("%d tracks, %d named processes; want %d each", len(tracks), len(names), P)
	}
	for id, n := range open {
		if n != 0 {
			t.Errorf("async send %s unbalanced (%d)", id, n)
		}
	}
	for _, k := range []string{"send", "recv", "wait", "redu", "copy", "allr"} {
		if kinds[k] == 0 {
			t.Errorf("no %q events (have %v)", k, kinds)
		}
	}
	t.Logf("%d events, %d bytes; kinds %v", len(doc.TraceEvents), buf.Len(), kinds)
}
