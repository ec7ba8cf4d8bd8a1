package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	body := `{"state":"up"}`
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	for _, c := range []struct {
		body string
		code int
		exit int
		err  string
	}{
		{`{"state":"up","host":0}`, 200, 0, ""},
		{`{"listen":"0.0.0.0:7400"}`, 200, 0, ""}, // names no state
		{`{"state":"starting"}`, 200, 1, `state "starting", not "up"`},
		{`{"error":"boom"}`, 500, 1, "status 500"},
	} {
		body, code = c.body, c.code
		exit, _, stderr := runCLI(t, "healthcheck", srv.URL+"/v1/health")
		if exit != c.exit || !strings.Contains(stderr, c.err) {
			t.Errorf("%d %s: exit %d, stderr %q; want %d and %q", c.code, c.body, exit, stderr, c.exit, c.err)
		}
	}
	if exit, _, stderr := runCLI(t, "healthcheck", "localhost:7402"); exit != 2 || !strings.Contains(stderr, "not an http://") {
		t.Errorf("bad URL: exit %d, %q", exit, stderr)
	}
	srv.Close()
	if exit, _, _ := runCLI(t, "healthcheck", srv.URL); exit != 1 {
		t.Errorf("nobody listening: exit %d, want 1", exit)
	}
}
