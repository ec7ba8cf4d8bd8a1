package labhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
)

// ExchangePath is the internal endpoint members of a collective read each
// other's published items from: GET /v1/exchange/{id}/{name}?for=HOST
// answers the item this host published for HOST (or for everyone) under
// request id, 404 while it is not there yet.
const ExchangePath = "/v1/exchange/"

// Bounds of the exchange store.
const (
	// MaxExchangeRequests is how many requests' items the store keeps;
	// a new request beyond it is refused while they all run, else the
	// oldest finished one's are dropped.
	MaxExchangeRequests = 64
	// ExchangeLinger is how long a finished request's items stay for
	// slower members still reading them (its last barrier).
	ExchangeLinger = 30 * time.Second
	// everyone is the reader of an item published for all members.
	everyone = -1
)

// exchange is the items this host publishes to the members of its
// collectives: QP attributes per peer, buffer descriptors, barriers.
type exchange struct {
	mu   sync.Mutex
	reqs map[string]*exReq
}

type exReq struct {
	items    map[exKey][]byte
	finished time.Time // zero while running
}

type exKey struct {
	name string
	for_ int
}

func newExchange() *exchange { return &exchange{reqs: map[string]*exReq{}} }

// open starts request id's items; an id in use, or a full store, is
// refused.
func (x *exchange) open(id string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pruneLocked(time.Now())
	if _, dup := x.reqs[id]; dup {
		return fmt.Errorf("id: %q was already used on this host; every run needs a new id", id)
	}
	if len(x.reqs) >= MaxExchangeRequests {
		var oldest string
		var at time.Time
		for k, r := range x.reqs {
			if !r.finished.IsZero() && (oldest == "" || r.finished.Before(at)) {
				oldest, at = k, r.finished
			}
		}
		if oldest == "" {
			return fmt.Errorf("id: %d collectives are running on this host; wait for one to finish", len(x.reqs))
		}
		delete(x.reqs, oldest)
	}
	x.reqs[id] = &exReq{items: map[exKey][]byte{}}
	return nil
}

// finish marks request id done: its items stay ExchangeLinger for
// members still reading them, then go.
func (x *exchange) finish(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r := x.reqs[id]; r != nil {
		r.finished = time.Now()
	}
	x.pruneLocked(time.Now())
}

func (x *exchange) pruneLocked(now time.Time) {
	for k, r := range x.reqs {
		if !r.finished.IsZero() && now.Sub(r.finished) > ExchangeLinger {
			delete(x.reqs, k)
		}
	}
}

// put publishes v (JSON) under (id, name) for host for_ (everyone: all).
func (x *exchange) put(id, name string, for_ int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.reqs[id]
	if r == nil {
		return fmt.Errorf("exchange: request %q is not open", id)
	}
	r.items[exKey{name, for_}] = b
	return nil
}

// get returns the item (id, name) for host for_, or for everyone.
func (x *exchange) get(id, name string, for_ int) ([]byte, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.reqs[id]
	if r == nil {
		return nil, false
	}
	if b, ok := r.items[exKey{name, for_}]; ok {
		return b, true
	}
	b, ok := r.items[exKey{name, everyone}]
	return b, ok
}

// size is how many requests the store holds.
func (x *exchange) size() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.reqs)
}

func (h *Host) serveExchange(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	for_, err := strconv.Atoi(r.URL.Query().Get("for"))
	if err != nil || for_ < 0 || for_ >= len(h.cl.Hosts) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("for: %q is not a host in [0, %d]", r.URL.Query().Get("for"), len(h.cl.Hosts)-1))
		return
	}
	b, ok := h.ex.get(id, name, for_)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("%s of %q not published (yet)", name, id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// PeerFailure is an exchange with a member that did not answer: the
// collective ends with it, naming the member.
type PeerFailure struct {
	Host int
	API  string
	Err  error
}

func (e *PeerFailure) Error() string {
	if e.API == "" {
		return fmt.Sprintf("peer host %d: %v", e.Host, e.Err)
	}
	return fmt.Sprintf("peer host %d (API %s): %v", e.Host, e.API, e.Err)
}
func (e *PeerFailure) Unwrap() error { return e.Err }

// exchangeClient is for reading the peers' exchange items.
var exchangeClient = &http.Client{Transport: &http.Transport{
	DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 8,
	IdleConnTimeout:     30 * time.Second,
}}

// fetchBackoff is the longest wait between two polls of one peer, for a
// run of members (one poll per peer per wait from every member: 64
// members polling 63 peers every 50 ms were 80 000 requests/s, which
// alone kept a 2-core machine busy).
func fetchBackoff(members int) time.Duration {
	return max(50*time.Millisecond, time.Duration(members)*5*time.Millisecond)
}

// fetch reads item (id, name) that peer published for this host into v,
// polling with backoff until it is there or ctx ends. A peer whose API
// refuses the connection (its process is gone) fails at once; one that
// does not answer (a dial that times out, or no route while ARP goes
// unanswered: a busy machine) fails when ctx ends, unless the run's peer
// watch gives up on it first. Both errors are *PeerFailure.
func (h *Host) fetch(ctx context.Context, peer labapi.Peer, id, name string, v any, members int) error {
	u := "http://" + peer.API + ExchangePath + url.PathEscape(id) + "/" + url.PathEscape(name) + "?for=" + strconv.Itoa(h.id)
	backoff := time.Millisecond
	refused := 0
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return &PeerFailure{peer.Host, peer.API, err}
		}
		resp, err := exchangeClient.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && rerr == nil:
				if err := json.Unmarshal(body, v); err != nil {
					return &PeerFailure{peer.Host, peer.API, fmt.Errorf("%s: %v", name, err)}
				}
				return nil
			case resp.StatusCode != http.StatusNotFound:
				return &PeerFailure{peer.Host, peer.API, fmt.Errorf("%s: HTTP %d: %s", name, resp.StatusCode, body)}
			}
			refused = 0
		} else {
			if ctx.Err() != nil {
				return &PeerFailure{peer.Host, peer.API, fmt.Errorf("no %s within the timeout: %v", name, ctx.Err())}
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				// Refused: the process is gone (or not yet listening:
				// members are started before requests, so allow a few).
				if refused++; refused >= 3 {
					return &PeerFailure{peer.Host, peer.API, fmt.Errorf("not answering: %v", err)}
				}
			}
		}
		select {
		case <-ctx.Done():
			return &PeerFailure{peer.Host, peer.API, fmt.Errorf("no %s within the timeout", name)}
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, fetchBackoff(members))
	}
}

// fetchAll runs fetch for every peer in parallel; the first error wins.
func (h *Host) fetchAll(ctx context.Context, peers []labapi.Peer, id, name string, into func(i int) any) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(peers))
	for i, p := range peers {
		go func() { errs <- h.fetch(ctx, p, id, name, into(i), len(peers)+1) }()
	}
	var first error
	for range peers {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
