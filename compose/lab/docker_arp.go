package lab

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The kernel's ARP table is one for every network namespace of the
// machine: its gc_thresh limits count the entries of all of them. In a
// docker lab every host container talks to every other (the collectives'
// exchange and peer watch) and to its fabric, so a lab of n containers
// holds about n² entries. Past gc_thresh3 (1024 by default) the kernel
// refuses new entries ("neighbor table overflow"): connects fail with no
// route to host and a 64-host collective fails (seen on this project's
// machine).
const arpThreshDir = "/proc/sys/net/ipv4/neigh/default/"

// arpNeed is the ARP entries a docker lab of containers needs: each one
// knows every other and the network's gateway, and so does the machine.
func arpNeed(containers int) int { return (containers + 1) * (containers + 1) }

// readThresh reads gc_threshN (0 when it cannot).
func readThresh(n int) int {
	b, err := os.ReadFile(arpThreshDir + "gc_thresh" + strconv.Itoa(n))
	if err != nil {
		return 0
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return v
}

// checkARPRoom refuses a lab the ARP table cannot hold when the limits
// cannot be raised (not root), saying the command that raises them.
func checkARPRoom(containers int) error {
	need := arpNeed(containers)
	t3 := readThresh(3)
	if t3 == 0 || t3 >= need {
		return nil
	}
	f, err := os.OpenFile(arpThreshDir+"gc_thresh3", os.O_WRONLY, 0)
	if err != nil {
		return invalid("--hosts: a docker lab of %d containers needs about %d ARP entries, and the kernel's table (shared by every network namespace) holds %d: "+
			"raise it as root with sysctl -w net.ipv4.neigh.default.gc_thresh2=%d net.ipv4.neigh.default.gc_thresh3=%d, or run fewer hosts (%v)",
			containers, need, t3, need, 2*need, err)
	}
	f.Close()
	return nil
}

// raiseARPRoom raises gc_thresh2 and gc_thresh3 to what a lab of
// containers needs, when they are lower, and says so: the change is the
// machine's and outlives the lab.
func raiseARPRoom(containers int, out io.Writer) error {
	need := arpNeed(containers)
	for _, c := range []struct{ n, want int }{{2, need}, {3, 2 * need}} {
		cur := readThresh(c.n)
		if cur == 0 || cur >= c.want {
			continue
		}
		path := arpThreshDir + "gc_thresh" + strconv.Itoa(c.n)
		if err := os.WriteFile(path, []byte(strconv.Itoa(c.want)), 0); err != nil {
			return fmt.Errorf("lab up: raising %s to %d: %v", path, c.want, err)
		}
		fmt.Fprintf(out, "raised net.ipv4.neigh.default.gc_thresh%d from %d to %d: %d containers need about %d ARP entries, and the kernel's table is shared by every network namespace (the setting stays after lab down)\n",
			c.n, cur, c.want, containers, need)
	}
	return nil
}
