package lab

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/units"
)

// The test binary stands in for `vcluster fabric` and `vcluster host`
// when fakeEnv is set and its first argument is fabric or host: a small
// server with the flags, ready file and HTTP API of the real ones, so the
// runtime and the commands are tested without the fabric's and hosts'
// code. What the fakes do on purpose:
//   - a host whose id is in LAB_FAKE_CRASH exits at once (a start that
//     fails, with a log line);
//   - a host whose id is in LAB_FAKE_STARTING never says "up";
//   - a collective whose size is ≥ 1G runs 3 s, asking the other
//     members' health every 50 ms: a member that stops answering ends it
//     with an error naming it (as a real host does);
//   - a fault plan containing "bad:" is refused (400).
const fakeEnv = "VCLUSTER_LAB_FAKE"

// runFake runs the stand-in named by args[0] and exits.
func runFake(args []string) {
	fs := flag.NewFlagSet(args[0], flag.ExitOnError)
	api := fs.String("api", "127.0.0.1:0", "")
	listen := fs.String("listen", "127.0.0.1:0", "")
	readyFile := fs.String("ready-file", "", "")
	secret := fs.String("secret-file", "", "")
	id := fs.Int("id", -1, "")
	fabricAddr := fs.String("fabric", "", "")
	fs.String("plane-speed", "", "")
	fs.String("config", "", "")
	fs.String("tun-netns", "", "")
	var sets multi
	fs.Var(&sets, "set", "")
	fs.Parse(args[1:])
	fmt.Fprintf(os.Stderr, "fake %s %d starting: %v\n", args[0], *id, args[1:])
	if b, err := os.ReadFile(*secret); err != nil || len(strings.TrimSpace(string(b))) < 16 {
		fmt.Fprintf(os.Stderr, "--secret-file %s: no secret (%v)\n", *secret, err)
		os.Exit(2)
	}
	if args[0] == "host" && inList(os.Getenv("LAB_FAKE_CRASH"), *id) {
		fmt.Fprintf(os.Stderr, "fake host %d: crashing on purpose\n", *id)
		os.Exit(3)
	}
	udp, err := net.ListenPacket("udp", *listen)
	if args[0] == "host" {
		udp, err = net.ListenPacket("udp", "127.0.0.1:0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", *api)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	if args[0] == "fabric" {
		fakeFabric(mux, udp.LocalAddr().String())
	} else {
		fakeHost(mux, *id, *fabricAddr)
	}
	rd, _ := json.Marshal(labapi.Ready{PID: os.Getpid(), API: ln.Addr().String(), Tunnel: udp.LocalAddr().String()})
	if err := WriteFileAtomic(*readyFile, rd, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "serving on %s\n", ln.Addr())
	http.Serve(ln, mux)
	os.Exit(1)
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func inList(list string, id int) bool {
	for _, s := range strings.Split(list, ",") {
		if s == strconv.Itoa(id) {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fakeFabric(mux *http.ServeMux, tunnel string) {
	var mu sync.Mutex
	var down []string
	mux.HandleFunc(labapi.FabricStatusPath, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		writeJSON(w, 200, labapi.FabricStatus{Listen: tunnel, Planes: []int{0, 1}, Lag: labapi.Lag{P99Ns: 42_000}, LinksDown: append([]string{}, down...)})
	})
	mux.HandleFunc(labapi.FabricFaultsPath, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "bad:") {
			writeJSON(w, 400, labapi.Error{Error: "plan: events[0]: target: no such link"})
			return
		}
		mu.Lock()
		down = append(down, "p0.t0.0/4<>p0.t1.0/0")
		mu.Unlock()
		writeJSON(w, 200, labapi.FaultResponse{Events: 1, StartNs: 1_000_000, Summary: "0s link_down p0.t0.0-p0.t1.0\n"})
	})
	mux.HandleFunc(labapi.FabricGraphPath, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "svg" {
			writeJSON(w, 501, labapi.Error{Error: "svg needs graphviz"})
			return
		}
		io.WriteString(w, "graph fabric {\n  \"p0.t0.0\" -- \"p0.t1.0\";\n}\n")
	})
	mux.HandleFunc(labapi.FabricCapturePath, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("port") != "p0.t0.0/1" {
			writeJSON(w, 404, labapi.Error{Error: fmt.Sprintf("no port %q (ports look like p0.t0.0/1)", r.URL.Query().Get("port"))})
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(pcapngHeader())
		for i := 0; ; i++ {
			if _, err := w.Write(pcapngPacket(uint64(i), []byte("frame "+strconv.Itoa(i)))); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
}

func fakeHost(mux *http.ServeMux, id int, fabric string) {
	mux.HandleFunc(labapi.HostHealthPath, func(w http.ResponseWriter, r *http.Request) {
		state := "up"
		if inList(os.Getenv("LAB_FAKE_STARTING"), id) {
			state = "starting"
		}
		writeJSON(w, 200, labapi.HostHealth{Host: id, State: state, Fabric: fabric, Address: fmt.Sprintf("fd00::%d", id), PID: os.Getpid(), Lag: labapi.Lag{P99Ns: 7_000}})
	})
	mux.HandleFunc(labapi.HostCollectivesPath, func(w http.ResponseWriter, r *http.Request) {
		var req labapi.CollectiveRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, 400, labapi.Error{Error: "body: " + err.Error()})
			return
		}
		size, err := units.ParseSize(req.Size)
		if err != nil {
			writeJSON(w, 400, labapi.Error{Error: "size: " + err.Error()})
			return
		}
		rank := -1
		for i, p := range req.Peers {
			if p.Host == id {
				rank = i
			}
		}
		resp := labapi.CollectiveResponse{Host: id, Rank: rank, Op: req.Op, Algo: "ring", Ranks: len(req.Peers), Bytes: size, Count: size / 4,
			TimeNs: int64(1000 * (rank + 1)), Verified: true, FailedPeer: -1}
		if size >= 1<<30 {
			end := time.Now().Add(3 * time.Second)
			for time.Now().Before(end) {
				for _, p := range req.Peers {
					if p.Host == id {
						continue
					}
					c := http.Client{Timeout: time.Second}
					pr, err := c.Get("http://" + p.API + labapi.HostHealthPath)
					if err != nil {
						resp.Verified, resp.Wrong, resp.FailedPeer = false, -1, p.Host
						resp.Error = fmt.Sprintf("peer host %d (%s) stopped answering: %v", p.Host, p.API, err)
						writeJSON(w, 200, resp)
						return
					}
					pr.Body.Close()
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		writeJSON(w, 200, resp)
	})
}

// pcapngHeader is a little-endian section header and one Ethernet
// interface description.
func pcapngHeader() []byte {
	le := binary.LittleEndian
	shb := make([]byte, 28)
	le.PutUint32(shb[0:], pcapngSHB)
	le.PutUint32(shb[4:], 28)
	le.PutUint32(shb[8:], 0x1A2B3C4D)
	le.PutUint16(shb[12:], 1)
	le.PutUint64(shb[16:], ^uint64(0))
	le.PutUint32(shb[24:], 28)
	idb := make([]byte, 20)
	le.PutUint32(idb[0:], 1)
	le.PutUint32(idb[4:], 20)
	le.PutUint16(idb[8:], 1) // Ethernet
	le.PutUint32(idb[12:], 65535)
	le.PutUint32(idb[16:], 20)
	return append(shb, idb...)
}

// pcapngPacket is an enhanced packet block of data at time ts µs.
func pcapngPacket(ts uint64, data []byte) []byte {
	le := binary.LittleEndian
	pad := (4 - len(data)%4) % 4
	n := 32 + len(data) + pad
	b := make([]byte, n)
	le.PutUint32(b[0:], pcapngEPB)
	le.PutUint32(b[4:], uint32(n))
	le.PutUint32(b[12:], uint32(ts>>32))
	le.PutUint32(b[16:], uint32(ts))
	le.PutUint32(b[20:], uint32(len(data)))
	le.PutUint32(b[24:], uint32(len(data)))
	copy(b[28:], data)
	le.PutUint32(b[n-4:], uint32(n))
	return b
}

// fakeDir is a fresh state directory path for a test.
func fakeDir(dir string) string { return filepath.Join(dir, "lab") }
