package experiments

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
)

func quickEnv(t *testing.T, e Experiment, sets ...string) *Env {
	t.Helper()
	cfg, err := config.Load("", e.ClusterSets())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ResolveParams(e, Quick, sets)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Config: cfg, Size: Quick, Params: p, Progress: io.Discard}
}

// Every experiment's quick run completes, writes its files, and every
// check of its TARGETS rows holds; a differing row fails the test by name.
func TestQuickRunsPass(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			e, _ := Lookup(name)
			dir := t.TempDir()
			r, err := Execute(context.Background(), e, quickEnv(t, e), dir, "test", nil, Manifest{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s\n%s", r.Table, CheckTable(r.Checks))
			if len(r.Checks) == 0 {
				t.Fatal("empty check table")
			}
			if ok, bad := r.Passed(); !ok {
				for _, b := range bad {
					t.Errorf("differs: %s", b)
				}
			}
			for _, f := range []string{"manifest.json", "results.csv", "results.json", "report.md", "report.html"} {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", f, err)
				}
			}
			for _, p := range r.Plots {
				for _, ext := range []string{".png", ".svg"} {
					if _, err := os.Stat(filepath.Join(dir, p.Name+ext)); err != nil {
						t.Error(err)
					}
				}
			}
			checkHTML(t, filepath.Join(dir, "report.html"), len(r.Plots))
		})
	}
}

// checkHTML parses the report as XML (it is written as XHTML) and checks
// that every image is embedded as a data URI and nothing else is linked.
func checkHTML(t *testing.T, path string, plots int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	imgs, rows := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report.html does not parse: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "img":
			imgs++
		case "tr":
			rows++
		case "script", "link", "iframe", "object":
			t.Errorf("report.html has a <%s>", se.Name.Local)
		}
		for _, a := range se.Attr {
			if (a.Name.Local == "src" || a.Name.Local == "href") && !strings.HasPrefix(a.Value, "data:image/png;base64,") {
				t.Errorf("<%s %s=%.40q> is not an embedded image", se.Name.Local, a.Name.Local, a.Value)
			}
		}
	}
	if imgs != plots {
		t.Errorf("report.html has %d images, want %d", imgs, plots)
	}
	if rows < 2 {
		t.Errorf("report.html check table has %d rows", rows)
	}
}

// Same config and seed → identical results.csv.
func TestDeterministicResults(t *testing.T) {
	e, _ := Lookup(DefaultName)
	var got [2][]byte
	for i := range got {
		dir := t.TempDir()
		if _, err := Execute(context.Background(), e, quickEnv(t, e, "size=4M", "losses=0,0.01", "roceQPs=1"), dir, "test", nil, Manifest{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "results.csv"))
		if err != nil {
			t.Fatal(err)
		}
		got[i] = b
	}
	if !bytes.Equal(got[0], got[1]) || len(got[0]) == 0 {
		t.Errorf("results.csv differs between two runs:\n%s\n%s", got[0], got[1])
	}
}

func TestResolveParams(t *testing.T) {
	e, _ := Lookup(DefaultName)
	p, err := ResolveParams(e, Full, []string{"size=1M"})
	if err != nil || p["size"] != "1M" || p["roceQPs"] != "1,2,4,8,16" {
		t.Errorf("ResolveParams = %v, %v", p, err)
	}
	if _, err := ResolveParams(e, Quick, []string{"nope=1"}); err == nil || !strings.Contains(err.Error(), "exp.size") {
		t.Errorf("unknown parameter: %v", err)
	}
	c, x := SplitSets([]string{"fabric.planes=2", "exp.size=1M"})
	if len(c) != 1 || len(x) != 1 || x[0] != "size=1M" {
		t.Errorf("SplitSets = %v %v", c, x)
	}
}
