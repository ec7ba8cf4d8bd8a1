package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
)

// fabricOf is the lab's fabric process (with a fabric per plane, the
// first: any of them answers for the whole topology).
func fabricOf(st *State) (*Process, error) {
	if p, ok := st.Process(FabricName); ok {
		return p, nil
	}
	fs := fabricsOf(st)
	if len(fs) == 0 {
		return nil, invalid("%s: the lab has no fabric process", st.Dir)
	}
	return fs[0], nil
}

// fabricsOf lists the lab's fabric processes in state order.
func fabricsOf(st *State) []*Process {
	var fs []*Process
	for i := range st.Processes {
		if st.Processes[i].Role == RoleFabric {
			fs = append(fs, &st.Processes[i])
		}
	}
	return fs
}

// portPlane matches the plane of a fabric port's name: a switch port
// "p1.t0.0/3" or a host's port "h5/p1".
var portPlane = regexp.MustCompile(`^p(\d+)\.|/p(\d+)$`)

// PlaneFabricName is plane p's fabric process in a lab with a fabric per
// plane (the docker runtime's service fabric-pP).
func PlaneFabricName(p int) string { return fmt.Sprintf("%s-p%d", FabricName, p) }

// fabricOfPort is the fabric that runs port's plane: its own plane's
// with a fabric per plane, else the lab's one fabric (which also answers
// for a name that is no port).
func fabricOfPort(st *State, port string) (*Process, error) {
	if m := portPlane.FindStringSubmatch(port); m != nil {
		n := m[1] + m[2]
		if plane, err := strconv.Atoi(n); err == nil {
			if p, ok := st.Process(PlaneFabricName(plane)); ok {
				return p, nil
			}
		}
	}
	return fabricOf(st)
}

// refused turns an API's 400 or 404 into an *InvalidError (the request
// was wrong, nothing ran).
func refused(err error) error {
	var se *StatusError
	if errors.As(err, &se) && (se.Status == http.StatusBadRequest || se.Status == http.StatusNotFound) {
		return &InvalidError{Err: errors.New(se.Message)}
	}
	return err
}

// Fault posts the fault plan in planFile to the lab's fabric, which
// applies it from now on, and prints its summary.
func Fault(ctx context.Context, dir, planFile string, out io.Writer) (labapi.FaultResponse, error) {
	var fr labapi.FaultResponse
	plan, err := os.ReadFile(planFile)
	if err != nil {
		return fr, invalid("PLAN: %v", err)
	}
	if len(strings.TrimSpace(string(plan))) == 0 {
		return fr, invalid("PLAN %s: empty (a fault plan is YAML with events: see docs/faults.md)", planFile)
	}
	st, _, err := Open(dir)
	if err != nil {
		return fr, err
	}
	fabs := fabricsOf(st)
	if len(fabs) == 0 {
		return fr, invalid("%s: the lab has no fabric process", st.Dir)
	}
	ctx, cancel := context.WithTimeout(ctx, quickTimeout*5)
	defer cancel()
	// Every fabric gets the plan (with a fabric per plane, each applies
	// the events of its planes and may refuse a target of another's);
	// the plan is refused only when every fabric refuses it, and the
	// first acceptance is the summary.
	var refusal error
	accepted := false
	for _, fab := range fabs {
		var r labapi.FaultResponse
		if err := post(ctx, fab.API, labapi.FabricFaultsPath, "application/yaml", plan, &r); err != nil {
			var se *StatusError
			if errors.As(err, &se) && se.Status == http.StatusBadRequest {
				if refusal == nil {
					refusal = invalid("%s: %s", planFile, se.Message)
				}
				continue
			}
			return fr, fmt.Errorf("%s (%s): %w", fab.Name, fab.API, err)
		}
		if !accepted {
			fr, accepted = r, true
		}
	}
	if !accepted {
		return fr, refusal
	}
	fmt.Fprintf(out, "fault plan %s: %s scheduled from fabric time %s\n", planFile, plural(fr.Events, "event"), fmtNs(fr.StartNs))
	if s := strings.TrimRight(fr.Summary, "\n"); s != "" {
		fmt.Fprintln(out, s)
	}
	return fr, nil
}

// plural is "1 event", "2 events".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fmtNs prints a virtual time in ns as a duration.
func fmtNs(ns int64) string { return time.Duration(ns).String() }

// Graph writes the fabric's topology in format (dot or svg) to out.
func Graph(ctx context.Context, dir, format string, out io.Writer) error {
	if format != "dot" && format != "svg" {
		return invalid("--format: %q; want dot or svg", format)
	}
	st, _, err := Open(dir)
	if err != nil {
		return err
	}
	fab, err := fabricOf(st)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, quickTimeout*10)
	defer cancel()
	resp, err := get(ctx, fab.API, labapi.FabricGraphPath+"?format="+url.QueryEscape(format))
	if err != nil {
		return refused(err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(out, resp.Body)
	return err
}

// Capture streams the pcapng capture of the fabric port named port to
// out: count packets (0: until the fabric or ctx ends the stream).
func Capture(ctx context.Context, dir, port string, count int, out io.Writer) (int, error) {
	if port == "" {
		return 0, invalid("PORT: empty (a fabric port name such as p0.t0.0/1; lab capture lists them when the name is unknown)")
	}
	if count < 0 {
		return 0, invalid("--count: %d; must be ≥ 0 (0: until interrupted)", count)
	}
	st, _, err := Open(dir)
	if err != nil {
		return 0, err
	}
	fab, err := fabricOfPort(st, port)
	if err != nil {
		return 0, err
	}
	resp, err := get(ctx, fab.API, labapi.FabricCapturePath+"?port="+url.QueryEscape(port))
	if err != nil {
		return 0, refused(err)
	}
	defer resp.Body.Close()
	n, err := copyPcapng(out, resp.Body, count)
	if ctx.Err() != nil {
		return n, nil // interrupted: what was captured is out
	}
	return n, err
}

// get GETs path at addr; the caller closes the body.
func get(ctx context.Context, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL(addr, path), nil)
	if err != nil {
		return nil, err
	}
	return do(http.DefaultClient, req)
}

// pcapng block types copyPcapng knows.
const (
	pcapngSHB = 0x0A0D0D0A // section header
	pcapngEPB = 6          // enhanced packet
	pcapngSPB = 3          // simple packet
	pcapngPB  = 2          // obsolete packet block
	// maxBlock bounds one block (a frame is at most a jumbo frame plus
	// options; a larger length is a broken stream).
	maxBlock = 1 << 20
)

// copyPcapng copies a pcapng stream block by block from r to w, writing
// each whole block at once, and stops after count packets (0: at the
// end of r). It returns the packets copied.
func copyPcapng(w io.Writer, r io.Reader, count int) (int, error) {
	var order binary.ByteOrder = binary.LittleEndian
	packets, sawSHB := 0, false
	hdr := make([]byte, 12)
	buf := make([]byte, 0, 4096)
	for {
		if _, err := io.ReadFull(r, hdr[:8]); err != nil {
			if err == io.EOF {
				return packets, nil
			}
			return packets, fmt.Errorf("capture stream: %w", err)
		}
		typ := binary.LittleEndian.Uint32(hdr[:4])
		if typ == pcapngSHB { // the same bytes in either order
			if _, err := io.ReadFull(r, hdr[8:12]); err != nil {
				return packets, fmt.Errorf("capture stream: section header: %w", err)
			}
			switch binary.LittleEndian.Uint32(hdr[8:12]) {
			case 0x1A2B3C4D:
				order = binary.LittleEndian
			case 0x4D3C2B1A:
				order = binary.BigEndian
			default:
				return packets, errors.New("capture stream: a section header with no byte-order magic: not pcapng")
			}
			sawSHB = true
		} else if !sawSHB {
			return packets, fmt.Errorf("capture stream: it starts with block type %#x, not a section header: not pcapng", typ)
		}
		typ = order.Uint32(hdr[:4])
		n := int(order.Uint32(hdr[4:8]))
		read := 8
		if typ == pcapngSHB {
			read = 12
		}
		if n < read+4 || n%4 != 0 || n > maxBlock {
			return packets, fmt.Errorf("capture stream: block type %#x with length %d: not pcapng", typ, n)
		}
		buf = append(buf[:0], hdr[:read]...)
		buf = append(buf, make([]byte, n-read)...)
		if _, err := io.ReadFull(r, buf[read:]); err != nil {
			return packets, fmt.Errorf("capture stream: block cut short: %w", err)
		}
		if _, err := w.Write(buf); err != nil {
			return packets, err
		}
		if typ == pcapngEPB || typ == pcapngSPB || typ == pcapngPB {
			packets++
			if count > 0 && packets >= count {
				return packets, nil
			}
		}
	}
}
