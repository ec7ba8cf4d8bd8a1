package labhost

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/wallclock"
)

// Any request body is answered (400 when bad) and never panics: the
// decoder and the validation, without a run (the exchange store is full
// of running requests, so a valid body is refused before it would run).
func FuzzCollectiveRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","op":"allreduce","size":"1M","peers":[{"host":0,"api":"127.0.0.1:1"},{"host":1,"api":"127.0.0.1:2"}]}`,
		`{"id":"a","op":"alltoall","algorithm":"pairwise","size":"18446744073709551615","peers":[]}`,
		`{"id":"","op":"","size":"","iters":-9223372036854775808,"timeout_ms":9223372036854775807}`,
		`{"peers":[{"host":-1,"api":"::"},{"host":99999999999,"api":"[::1]:0"}]}`,
		`null`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	lab := testLab(f)
	cl, err := cluster.New(LabTimers(lab.Config), wallclock.New())
	if err != nil {
		f.Fatal(err)
	}
	h := &Host{id: 0, lab: lab, cl: cl, loop: cl.Loop, ex: newExchange(), done: make(chan struct{})}
	for i := range MaxExchangeRequests {
		h.ex.open("busy" + string(rune('A'+i%26)) + string(rune('a'+i/26)))
	}
	srv := http.HandlerFunc(h.serveCollective)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/collectives", bytes.NewReader(body)))
		if rec.Code != http.StatusBadRequest && rec.Code != http.StatusConflict {
			t.Fatalf("body %q: HTTP %d, want 400 or 409", body, rec.Code)
		}
		if !bytes.Contains(rec.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("body %q: answer without an error: %s", body, rec.Body.Bytes())
		}
	})
}
