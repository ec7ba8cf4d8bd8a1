package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
)

// quickTimeout bounds a status or health request.
const quickTimeout = 3 * time.Second

// maxBody bounds a JSON answer the lab reads (a capture or graph is
// streamed, not read whole).
const maxBody = 16 << 20

// StatusError is an API's answer with an HTTP status ≥ 400.
type StatusError struct {
	URL     string
	Status  int
	Message string // the labapi.Error body, or the body's text
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.URL, e.Status, http.StatusText(e.Status), e.Message)
}

// apiURL is the URL of path on the API at addr (host:port).
func apiURL(addr, path string) string { return "http://" + addr + path }

// do sends req and, for a status ≥ 400, returns a *StatusError with the
// labapi.Error message; the caller closes the body of a good answer.
func do(client *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := strings.TrimSpace(string(b))
		var e labapi.Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &StatusError{URL: req.URL.String(), Status: resp.StatusCode, Message: msg}
	}
	return resp, nil
}

// getJSON GETs path from the API at addr into v, within timeout.
func getJSON(ctx context.Context, addr, path string, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL(addr, path), nil)
	if err != nil {
		return err
	}
	resp, err := do(http.DefaultClient, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(v); err != nil {
		return fmt.Errorf("%s: the answer is not JSON of the API: %v", req.URL, err)
	}
	return nil
}

// post POSTs body (contentType) to path at addr and decodes the answer
// into v.
func post(ctx context.Context, addr, path, contentType string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiURL(addr, path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := do(http.DefaultClient, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(v); err != nil {
		return fmt.Errorf("%s: the answer is not JSON of the API: %v", req.URL, err)
	}
	return nil
}

// hostHealth is GET /v1/health of a host.
func hostHealth(ctx context.Context, api string) (labapi.HostHealth, error) {
	var h labapi.HostHealth
	err := getJSON(ctx, api, labapi.HostHealthPath, quickTimeout, &h)
	return h, err
}

// fabricStatus is GET /v1/status of the fabric.
// FabricStatus is a fabric's GET /v1/status at api (host:port).
func FabricStatus(ctx context.Context, api string) (labapi.FabricStatus, error) {
	return fabricStatus(ctx, api)
}

func fabricStatus(ctx context.Context, api string) (labapi.FabricStatus, error) {
	var s labapi.FabricStatus
	err := getJSON(ctx, api, labapi.FabricStatusPath, quickTimeout, &s)
	return s, err
}
