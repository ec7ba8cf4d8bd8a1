package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newHealthcheckCmd) }

// newHealthcheckCmd is what a lab container's healthcheck runs: the
// image is FROM scratch, with no curl or wget, so the binary asks.
func newHealthcheckCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck URL",
		Short: "Exit 0 when URL (a lab process's /v1/health) answers 200 and, if it says a state, \"up\"",
		Long: `healthcheck GETs URL and exits 0 when it answers 200 with a JSON body whose
"state" is "up" (or that names no state), 1 otherwise, saying why: the
healthcheck of a lab's containers (docs/lab.md), whose image holds only
the vcluster binary.`,
		Example: `  vcluster healthcheck http://127.0.0.1:7402/v1/health`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("healthcheck: takes one URL, got %d arguments", len(args)))
			}
			u, err := url.Parse(args[0])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError(fmt.Errorf("healthcheck: %q is not an http:// or https:// URL", args[0]))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "bound on the request")
	limit(cmd.Flags(), "timeout", durationIn(time.Millisecond, time.Minute, false))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return healthcheck(cmd.Context(), args[0], timeout)
	}
	return cmd
}

// healthcheck is the healthcheck command's test.
func healthcheck(ctx context.Context, u string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d: %.200s", u, resp.StatusCode, body)
	}
	var h struct {
		State *string `json:"state"`
	}
	if json.Unmarshal(body, &h) == nil && h.State != nil && *h.State != "up" {
		return errors.New(u + ": state " + fmt.Sprintf("%q", *h.State) + ", not \"up\"")
	}
	return nil
}
