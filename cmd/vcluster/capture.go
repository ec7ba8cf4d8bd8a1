package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// jobCapture is the packet capture of one command's run (output.pcap):
// every cluster the observer watches from startCapture to finish gets
// its named ports tapped, labelled with the point that runs.
type jobCapture struct {
	c      *cluster.Capture
	remove func() // takes the capture's watcher off the observer
	err    error  // the first Attach error, reported by finish
}

// startCapture opens the capture cfg asks for into cfg.Output.Dir (nothing
// when output.pcap is empty) and attaches it to every cluster obs watches
// until finish. Port names were checked when the config was validated.
func startCapture(obs *observer, cfg config.Config) (*jobCapture, error) {
	if len(cfg.Output.Pcap) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(cfg.Output.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("output.dir: %w", err)
	}
	c, err := cluster.NewCapture(cfg.Output, cfg.Output.Dir)
	if err != nil {
		return nil, err
	}
	jc := &jobCapture{c: c}
	jc.remove = obs.addWatcher(func(cl *cluster.Cluster, point int, label string) {
		if label == "" {
			label = obs.exp
		}
		if err := jc.c.Attach(cl, label); err != nil && jc.err == nil {
			jc.err = err
		}
	}, nil)
	return jc, nil
}

// finish closes the capture files and prints the capture's summary on w.
// A nil jobCapture (no capture) does nothing.
func (jc *jobCapture) finish(w io.Writer) error {
	if jc == nil || jc.remove == nil {
		return nil
	}
	jc.remove()
	jc.remove = nil
	err := jc.c.Close()
	fmt.Fprint(w, jc.c.Summary())
	if jc.err != nil {
		return fmt.Errorf("capture: %w", jc.err)
	}
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return nil
}

// startObserved starts what follows a one-cluster command's run: the
// observer of f's flags (progress, metrics) and the capture cfg asks for.
// done stops both; call it deferred with the command's error, which it
// sets to the capture's error if there was none.
func (f *runFlags) startObserved(stderr io.Writer, cfg config.Config) (obs *observer, done func(err *error), err error) {
	obs, stop, err := f.startObserver(stderr)
	if err != nil {
		return nil, nil, err
	}
	capt, err := startCapture(obs, cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return obs, func(err *error) {
		if cerr := capt.finish(stderr); cerr != nil && *err == nil {
			*err = cerr
		}
		stop()
	}, nil
}
