// Command vcluster-cni is the vcluster CNI plugin (package compose/labcni).
package main

import "github.com/vcluster/vcluster/compose/labcni"

func main() { labcni.Main() }
