package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/pathquality"
)

// The path-quality control plane's run-directory files (fabric.pathQuality
// on): its time series, its advertisement decisions, the HDC records as
// JSON lines and their excerpts as a pcap — the names package pathquality
// gives them.
const (
	pqSamplesFile = pathquality.SamplesFile
	pqAdvertsFile = pathquality.AdvertsFile
	hdcJSONLFile  = pathquality.HDCJSONFile
	hdcPcapFile   = pathquality.HDCPcapFile
)

// pathQualityFileNames are the files a run with the control plane on
// writes, in manifest order (none when it is off).
func pathQualityFileNames(cfg config.Config) []string {
	if !cfg.PathQualityEnabled() {
		return nil
	}
	return []string{pqSamplesFile, pqAdvertsFile, hdcJSONLFile, hdcPcapFile}
}

// pathQualityFiles writes the control plane's outputs of every cluster the
// observer folds that has one, one block each, as counters.csv does: the
// CSVs under point,label,cluster columns (one header), the JSON lines
// with those three fields first, the pcap as one capture (one file
// header, every cluster's records in turn).
type pathQualityFiles struct {
	samples, adverts, jsonl, pcap *os.File
	header                        [2]bool // the CSV headers are written
	pcapHeader                    bool
	err                           error // the first error
}

// createPathQualityFiles creates the four files in dir.
func createPathQualityFiles(dir string) (*pathQualityFiles, error) {
	w := &pathQualityFiles{}
	for _, f := range []struct {
		dst  **os.File
		name string
	}{{&w.samples, pqSamplesFile}, {&w.adverts, pqAdvertsFile}, {&w.jsonl, hdcJSONLFile}, {&w.pcap, hdcPcapFile}} {
		fh, err := os.Create(filepath.Join(dir, f.name))
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		*f.dst = fh
	}
	return w, nil
}

// block writes cp's outputs for one cluster.
func (w *pathQualityFiles) block(cp *pathquality.ControlPlane, point, label string, cl int) {
	if w.err != nil {
		return
	}
	prefix := csvField(point) + "," + csvField(label) + "," + strconv.Itoa(cl) + ","
	var b bytes.Buffer
	for i, f := range []struct {
		write func(io.Writer) error
		out   *os.File
	}{{cp.WriteSamplesCSV, w.samples}, {cp.WriteAdvertsCSV, w.adverts}} {
		b.Reset()
		if w.err = f.write(&b); w.err != nil {
			return
		}
		if w.err = prefixLines(f.out, &b, "point,label,cluster,", prefix, !w.header[i]); w.err != nil {
			return
		}
		w.header[i] = true
	}
	b.Reset()
	if w.err = cp.WriteHDCJSONL(&b); w.err != nil {
		return
	}
	fields := fmt.Sprintf(`{"point":%q,"label":%q,"cluster":%d,`, point, label, cl)
	if w.err = prefixJSONLines(w.jsonl, &b, fields); w.err != nil {
		return
	}
	b.Reset()
	if w.err = cp.WriteHDCPcap(&b); w.err != nil {
		return
	}
	data := b.Bytes()
	if w.pcapHeader {
		// Every cluster's capture has the same file header (Ethernet,
		// fabric.HDCSnapLen): keep the first.
		data = data[min(pcapFileHeaderLen, len(data)):]
	}
	w.pcapHeader = true
	_, w.err = w.pcap.Write(data)
}

// pcapFileHeaderLen is a classic pcap file's global header.
const pcapFileHeaderLen = 24

// prefixLines copies the CSV in src to dst with prefix before every row
// and headPrefix before its header line, which is written only if head.
func prefixLines(dst io.Writer, src io.Reader, headPrefix, prefix string, head bool) error {
	bw := bufio.NewWriter(dst)
	sc := bufio.NewScanner(src)
	sc.Buffer(nil, 1<<20)
	for first := true; sc.Scan(); first = false {
		switch {
		case first && head:
			bw.WriteString(headPrefix)
		case first:
			continue
		default:
			bw.WriteString(prefix)
		}
		bw.Write(sc.Bytes())
		bw.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// prefixJSONLines copies the JSON objects of src, one a line, to dst with
// fields (`{"k":v,…,`) in place of each one's opening brace.
func prefixJSONLines(dst io.Writer, src io.Reader, fields string) error {
	bw := bufio.NewWriter(dst)
	sc := bufio.NewScanner(src)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 2 || line[0] != '{' {
			return fmt.Errorf("%s: a line that is no JSON object: %.40q", hdcJSONLFile, line)
		}
		if bytes.Equal(bytes.TrimSpace(line[1:]), []byte("}")) {
			bw.WriteString(strings.TrimSuffix(fields, ",")) // an empty object
		} else {
			bw.WriteString(fields)
		}
		bw.Write(line[1:])
		bw.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// Close closes the files; it returns the first error writing them.
func (w *pathQualityFiles) Close() error {
	errs := []error{w.err}
	for _, f := range []*os.File{w.samples, w.adverts, w.jsonl, w.pcap} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("path-quality files: %w", err)
	}
	return nil
}

// pqCounters is a cluster's control plane for /metrics: the links' and
// routes' latest state, its totals and each switch's HDC records.
type pqCounters struct {
	links  []pathquality.LinkState
	routes []pathquality.RouteState
	stats  pathquality.Stats
	hdc    []switchHDC // switch order
}

type switchHDC struct {
	name    string
	records uint64
}

// readPathQuality reads c's control plane, nil when it has none.
func readPathQuality(c *cluster.Cluster) *pqCounters {
	cp := c.PathQuality
	if cp == nil {
		return nil
	}
	out := &pqCounters{links: cp.Links(), routes: cp.Routes(), stats: cp.Stats()}
	for _, s := range c.Topo.Switches {
		h := s.HDC()
		if h == nil {
			continue
		}
		var n uint64
		for _, p := range h.Total {
			n += p.Records
		}
		out.hdc = append(out.hdc, switchHDC{s.Name, n})
	}
	return out
}

// plus is the reading of a point's clusters so far (p, may be nil) and
// then q (may be nil): the totals and HDC records add up; the links' and
// routes' states are the latest cluster's.
func (p *pqCounters) plus(q *pqCounters) *pqCounters {
	switch {
	case p == nil:
		return q
	case q == nil:
		return p
	}
	out := &pqCounters{links: q.links, routes: q.routes, stats: p.stats}
	s := &out.stats
	s.Samples += q.stats.Samples
	s.UpdatesSent += q.stats.UpdatesSent
	s.UpdateBytes += q.stats.UpdateBytes
	s.UpdatesSuppressed += q.stats.UpdatesSuppressed
	s.WeightChanges += q.stats.WeightChanges
	s.BucketsMoved += q.stats.BucketsMoved
	s.HDCRecords += q.stats.HDCRecords
	idx := map[string]int{}
	for _, h := range p.hdc {
		idx[h.name] = len(out.hdc)
		out.hdc = append(out.hdc, h)
	}
	for _, h := range q.hdc {
		if i, ok := idx[h.name]; ok {
			out.hdc[i].records += h.records
		} else {
			out.hdc = append(out.hdc, h)
		}
	}
	return out
}
