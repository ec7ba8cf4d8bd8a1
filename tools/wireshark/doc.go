// Package wireshark holds vcluster's Wireshark plugin for MRC, mrc.lua (a
// Lua dissector: install and use it as README.md says), and the tests that
// run tshark with it over captures of simulated MRC and RoCE traffic and
// compare every decoded field with mrc's own codec. It has no Go API.
package wireshark
