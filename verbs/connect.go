package verbs

import "errors"

// Connect errors of RC queue pairs that keep IB's attribute rules
// (ConnectAttrs).
var (
	ErrConnectState = errors.New("verbs: Connect on a QP that is not in RESET")
	ErrConnectQPN   = errors.New("verbs: local attributes name another QPN")
)

// ConnectAttrs checks a Connect of the QP numbered qpn in state and
// returns both sides' attributes with QPNs and PSNs masked to 24 bits, as
// the wire carries them. RoCE and the multipath RoCEv2 kinds share it.
func ConnectAttrs(state QPState, qpn uint32, local, remote QPAttrs) (QPAttrs, QPAttrs, error) {
	const mask = 1<<24 - 1
	if state != QPReset {
		return local, remote, ErrConnectState
	}
	if local.QPN&mask != qpn {
		return local, remote, ErrConnectQPN
	}
	local.InitialPSN &= mask
	remote.InitialPSN &= mask
	remote.QPN &= mask
	return local, remote, nil
}
