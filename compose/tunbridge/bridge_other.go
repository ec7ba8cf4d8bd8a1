//go:build !linux

package tunbridge

import (
	"errors"
	"fmt"
	"runtime"
)

// Bridge is an open TUN device in a network namespace (Linux only).
type Bridge struct{ name string }

var errNotLinux = fmt.Errorf("%w: TUN devices in network namespaces need Linux, not %s", ErrUnavailable, runtime.GOOS)

// Open validates o, then fails: there are no network namespaces here.
func Open(o Options) (*Bridge, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return nil, errNotLinux
}

func (b *Bridge) Read(p []byte) (int, error)  { return 0, errors.ErrUnsupported }
func (b *Bridge) Write(p []byte) (int, error) { return 0, errors.ErrUnsupported }
func (b *Bridge) Close() error                { return nil }
func (b *Bridge) Name() string                { return b.name }

// Available says why not: this is not Linux.
func Available() error { return errNotLinux }
